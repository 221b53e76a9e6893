//! Garbage collection of a table's objects. The table keeps the objects, Bloom sidecars and
//! manifests of its newest version, and every manifest a version of its log names. Any other
//! object under `<table>/data/`, sidecar under `<table>/_ravel/blooms/`, manifest under
//! `<table>/_ravel/manifests/` or scratch object under `<table>/_ravel/tmp/` is unreferenced: left by a load or compaction that failed or
//! was killed before its commit, or removed by a version (a compaction replaced it). `gc` reports every such object and deletes those older
//! than a retention: since their last write, or, for a removed object, since its removal, so
//! that a reader part-way through an older version keeps reading it within the retention.
//!
//! A running load or compaction's objects are unreferenced until its commit. Such a writer holds a
//! lease (see [`ravel_store::lease`]): while any live lease exists on the table, `gc` deletes nothing and
//! names the loads that block it. The retention is a second guard: since names are content
//! hashes, a load may find an old orphan already under the name of an object it just encoded
//! (a rerun after a crash does); the loader then writes the object again, which restarts its
//! age. And a load checks, just before its commit, that every object it lists is stored: one
//! whose object `gc` deleted fails and publishes nothing.
//!
//! Order of work: read the log, list the objects, pick the unreferenced ones older than the
//! retention; read the leases (a writer holds its lease from before its first upload until
//! after its commit, so every object listed before is either in a version read after, in a
//! live lease's load, or an orphan); then read the log again, and just before each delete
//! read the leases again (a load may have started meanwhile) and ask the object's age again. A
//! referenced object is never deleted. A table is what has anything stored under its prefix:
//! one with a layout or objects but no versions is collected like any other.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use ravel_log::{LogError, TableLog};
use ravel_manifest::ManifestError;
use ravel_store::{Store, StoreError, TablePaths};
use serde::Serialize;

pub use ravel_store::lease;
pub use ravel_store::lease::{FoundLease, HeldLease, Lease, LeaseError, STALE_AFTER, read_leases};

/// What `gc` does.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// Unreferenced objects written longer ago than this are deleted.
    pub older_than: Duration,
    /// Report only; delete nothing.
    pub dry_run: bool,
    /// A lease not rewritten for this long no longer blocks (its load is dead); normally
    /// [`STALE_AFTER`].
    pub stale_lease_after: Duration,
}

impl GcOptions {
    /// Deletes unreferenced objects older than `older_than`; leases go stale after
    /// [`STALE_AFTER`].
    pub fn new(older_than: Duration, dry_run: bool) -> GcOptions {
        GcOptions {
            older_than,
            dry_run,
            stale_lease_after: STALE_AFTER,
        }
    }
}

/// One unreferenced object.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Unreferenced {
    pub key: String,
    pub bytes: u64,
    /// Seconds since its last write, or since a version removed it if one did.
    pub age_s: u64,
    /// A version removed it (a compaction replaced it): readers of older versions may still
    /// read it within the retention.
    pub removed: bool,
    /// Deleted by this run.
    pub deleted: bool,
    /// A local store's staging file (`<object>#<n>`) that a killed writer left: not an object,
    /// so no listing of the store shows it (see [`ravel_store::StagingFile`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub staging: bool,
}

/// What `gc` found and did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct GcReport {
    pub table: String,
    pub manifests: usize,
    /// Objects under the table's data prefix and manifests under `_ravel/manifests/`.
    pub objects: usize,
    /// Of those, referenced by the table (see the crate docs).
    pub referenced: usize,
    pub unreferenced: Vec<Unreferenced>,
    pub deleted: usize,
    pub deleted_bytes: u64,
    pub older_than_s: u64,
    pub dry_run: bool,
    /// The table's leases: running loads (live) and dead ones (stale).
    pub leases: Vec<FoundLease>,
    /// Keys of the live leases that kept this run from deleting anything: loads running now,
    /// whose objects are unreferenced until they commit.
    pub blocked_by: Vec<String>,
    /// The log files the table's log window expired, and what was deleted of them.
    pub log: LogReport,
}

/// What `gc` found and deleted of the table's log: the entries, checksum files and
/// checkpoints of the versions before the newest checkpoint older than the log window
/// (`delta.logRetentionDuration`; see [`ravel_log::ExpiredLog`]).
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct LogReport {
    /// The table's log window, in seconds.
    pub window_s: u64,
    /// The checkpoint the log starts at once the expired files are deleted; `None` when the
    /// window expired none.
    pub starts_at: Option<u64>,
    /// Log files the window expired, and their bytes.
    pub expired: usize,
    pub expired_bytes: u64,
    /// Of those, deleted by this run (none on a dry run, or while a load runs).
    pub deleted: usize,
    pub deleted_bytes: u64,
    /// Why no log file is deleted though the window expired some (the checkpoint the log
    /// would start at disagrees with the log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Why `gc` could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GcError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(
        "table {0:?} has nothing stored under its prefix in this store (no layout, schema, objects or loads)"
    )]
    NoSuchTable(String),
    #[error("{what} the staging file {key}")]
    Staging {
        what: &'static str,
        key: String,
        #[source]
        source: std::io::Error,
    },
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
        match self {
            GcError::NoSuchTable(_) => true,
            GcError::Store(e) => e.is_invalid_input(),
            _ => false,
        }
    }
}

/// What the table references: every object, sidecar and manifest that `gc` keeps.
struct Refs {
    /// Manifests of the newest version.
    manifests: usize,
    /// Objects and sidecars of the newest version; manifests any version names.
    keys: HashSet<String>,
    /// Objects and sidecars the newest version no longer references, with the seconds since
    /// they left: readers of older versions may read them until the retention has passed.
    removed: HashMap<String, u64>,
}

async fn referenced(
    store: &Arc<dyn ObjectStore>,
    table: &TablePaths,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Refs, GcError> {
    let log = TableLog::new(store.clone(), table.clone());
    let history = log.history().await?;
    let snapshot = if history.is_empty() {
        log.latest().await?
    } else {
        history.replay()
    };
    let live = log.manifests(&snapshot).await?;
    let refs = log.references(&snapshot, &live).await?;
    let mut keys = refs.live;
    // Every manifest a readable version names stays: older versions read through it (and the
    // manifests of objects removed within the files window, which the checkpoint the log starts
    // at names by its tombstones).
    for a in history.all().flat_map(|e| &e.actions) {
        let added = a.add.as_ref().and_then(|a| a.tag(ravel_log::TAG_MANIFEST));
        let removed = a
            .remove
            .as_ref()
            .and_then(|r| r.tags.as_ref()?.get(ravel_log::TAG_MANIFEST));
        keys.extend(
            added
                .or(removed.map(String::as_str))
                .map(|m| table.absolute(m)),
        );
    }
    let now_ms = now.timestamp_millis();
    let removed: HashMap<String, u64> = refs
        .removed
        .into_iter()
        .map(|(key, at)| {
            let age_ms = now_ms - at.unwrap_or(now_ms);
            (key, (age_ms.max(0) / 1000) as u64)
        })
        .collect();
    Ok(Refs {
        manifests: live.len(),
        keys,
        removed,
    })
}

/// Fails unless anything is stored under the table's prefix (a layout, a schema, a lease,
/// objects, versions): a name with nothing under it is a mistake, not an empty table.
async fn exists(os: &dyn ObjectStore, table: &TablePaths) -> Result<(), GcError> {
    let top = os
        .list_with_delimiter(Some(&table.root()))
        .await
        .map_err(|source| GcError::Request {
            what: "listing",
            key: table.root().to_string(),
            source,
        })?;
    if top.objects.is_empty() && top.common_prefixes.is_empty() {
        return Err(GcError::NoSuchTable(table.name().to_string()));
    }
    Ok(())
}

async fn list(store: &dyn ObjectStore, dir: &Path) -> Result<Vec<ObjectMeta>, GcError> {
    store
        .list(Some(dir))
        .try_collect()
        .await
        .map_err(|source| GcError::Request {
            what: "listing",
            key: dir.to_string(),
            source,
        })
}

/// Objects other Delta writers added (anywhere under the table, as their `add` named them) that
/// a version removed since (a compaction took them in) and that are still stored.
async fn removed_elsewhere(
    os: &dyn ObjectStore,
    table: &TablePaths,
    refs: &Refs,
) -> Result<Vec<ObjectMeta>, GcError> {
    let ours = [
        table.data_dir().to_string() + "/",
        table.root().to_string() + "/_ravel/",
    ];
    let mut found = Vec::new();
    for key in refs.removed.keys() {
        if ours.iter().any(|dir| key.starts_with(dir.as_str())) {
            continue;
        }
        match os.head(&Path::from(key.as_str())).await {
            Ok(meta) => found.push(meta),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(source) => {
                return Err(GcError::Request {
                    what: "reading the age of",
                    key: key.clone(),
                    source,
                });
            }
        }
    }
    Ok(found)
}

/// An object no version references: its age is since its last write, or since its removal
/// when a version removed it (readers of older versions may read it until then).
fn unreferenced_object(
    refs: &Refs,
    now: chrono::DateTime<chrono::Utc>,
    m: &ObjectMeta,
) -> Unreferenced {
    let key = m.location.to_string();
    let written = age_s(now, m.last_modified);
    let removed = refs.removed.get(&key).copied();
    Unreferenced {
        age_s: removed.map_or(written, |r| r.min(written)),
        removed: removed.is_some(),
        key,
        bytes: m.size,
        deleted: false,
        staging: false,
    }
}

/// The staging files killed writers left anywhere under the table (objects, sidecars,
/// manifests, scratch, log entries).
fn staging_files(
    store: &Store,
    table: &TablePaths,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<Unreferenced>, GcError> {
    let dir = table.root();
    let files = store
        .staging_files(&dir)
        .map_err(|source| GcError::Staging {
            what: "listing",
            key: dir.to_string(),
            source,
        })?;
    Ok(files
        .into_iter()
        .map(|f| Unreferenced {
            age_s: age_s(now, f.modified),
            key: f.key,
            bytes: f.bytes,
            removed: false,
            deleted: false,
            staging: true,
        })
        .collect())
}

fn age_s(now: chrono::DateTime<chrono::Utc>, written: chrono::DateTime<chrono::Utc>) -> u64 {
    (now - written).num_seconds().max(0) as u64
}

/// Keys of the leases that block deletion now.
fn live(leases: &[FoundLease]) -> Vec<String> {
    leases
        .iter()
        .filter(|l| l.live)
        .map(|l| l.key.clone())
        .collect()
}

/// Reports the unreferenced objects of `table` and deletes those older than the retention,
/// unless a running load's lease blocks it.
pub async fn gc(store: &Store, table: &str, opts: &GcOptions) -> Result<GcReport, GcError> {
    let table = TablePaths::new(table)?;
    let arc = store.object_store().clone();
    let os = arc.as_ref();
    exists(os, &table).await?;
    // Ages are by the store's clock: this machine's may be off.
    let clock = ravel_store::StoreClock::read(os).await;
    let now = clock.now();
    let refs = referenced(&arc, &table, now).await?;
    let mut listed = list(os, &table.data_dir()).await?;
    listed.extend(list(os, &table.commit_manifests_dir()).await?);
    listed.extend(list(os, &table.blooms_dir()).await?);
    // Scratch objects of merges that died (a running one holds a lease, which blocks gc).
    listed.extend(list(os, &table.scratch_root()).await?);
    listed.extend(removed_elsewhere(os, &table, &refs).await?);
    let mut unreferenced: Vec<Unreferenced> = listed
        .iter()
        .filter(|m| !refs.keys.contains(m.location.as_ref()))
        .map(|m| unreferenced_object(&refs, now, m))
        .collect();
    let referenced = listed.len() - unreferenced.len();
    unreferenced.extend(staging_files(store, &table, now)?);
    unreferenced.sort_by(|a, b| a.key.cmp(&b.key));
    // Read after the listing: a load whose object was listed held its lease since before.
    let mut leases = read_leases(os, &table, opts.stale_lease_after, &clock).await?;
    let mut blocked_by = live(&leases);
    let retention = opts.older_than.as_secs();
    let mut deleted_bytes = 0;
    if !opts.dry_run && blocked_by.is_empty() {
        if unreferenced.iter().any(|u| u.age_s >= retention) {
            let outcome = delete_old(store, &table, opts, &clock, &mut unreferenced).await?;
            deleted_bytes = outcome.deleted_bytes;
            blocked_by = outcome.blocked_by;
        }
        delete_stale_leases(os, retention, &mut leases).await?;
    }
    let mut log = expired_log(&arc, &table, &clock).await?;
    if !opts.dry_run && blocked_by.is_empty() {
        blocked_by = clean_log(&arc, &table, opts, &clock, &mut log).await?;
    }
    for key in &blocked_by {
        tracing::warn!(lease = %key, "a load is running: gc deleted nothing it had not deleted before it started");
    }
    Ok(GcReport {
        table: table.name().to_string(),
        manifests: refs.manifests,
        objects: listed.len(),
        referenced,
        deleted: unreferenced.iter().filter(|u| u.deleted).count(),
        unreferenced,
        deleted_bytes,
        older_than_s: retention,
        dry_run: opts.dry_run,
        leases,
        blocked_by,
        log: log.report,
    })
}

/// The log files the table's log window expired (see [`ravel_log::ExpiredLog`]).
struct LogWork {
    expired: ravel_log::ExpiredLog,
    report: LogReport,
}

/// What the table's log window (from its newest metadata) expires now.
async fn expired_log(
    store: &Arc<dyn ObjectStore>,
    table: &TablePaths,
    clock: &ravel_store::StoreClock,
) -> Result<LogWork, GcError> {
    let log = TableLog::new(store.clone(), table.clone());
    let snapshot = log.latest().await?;
    let window_ms = ravel_log::log_window_ms(snapshot.metadata.as_ref());
    let expired = log
        .expired_log(clock.now().timestamp_millis(), window_ms)
        .await?;
    let report = LogReport {
        window_s: (window_ms / 1000) as u64,
        starts_at: expired.checkpoint,
        expired: expired.files.len(),
        expired_bytes: expired.bytes(),
        deleted: 0,
        deleted_bytes: 0,
        refused: expired.refused.clone(),
    };
    Ok(LogWork { expired, report })
}

/// Deletes the expired log files unless a load started meanwhile (its lease's key returned:
/// its commit reads the entries after the version it read).
async fn clean_log(
    store: &Arc<dyn ObjectStore>,
    table: &TablePaths,
    opts: &GcOptions,
    clock: &ravel_store::StoreClock,
    work: &mut LogWork,
) -> Result<Vec<String>, GcError> {
    if work.expired.files.is_empty() {
        return Ok(Vec::new());
    }
    let blocked_by =
        live(&read_leases(store.as_ref(), table, opts.stale_lease_after, clock).await?);
    if !blocked_by.is_empty() {
        return Ok(blocked_by);
    }
    let log = TableLog::new(store.clone(), table.clone());
    let deleted = log.delete_expired(&work.expired).await?;
    tracing::info!(
        table = table.name(),
        files = deleted.files,
        bytes = deleted.bytes,
        starts_at = work.expired.checkpoint,
        "deleted the log files the log window expired"
    );
    work.report.deleted = deleted.files;
    work.report.deleted_bytes = deleted.bytes;
    Ok(Vec::new())
}

/// What [`delete_old`] did.
struct Deleted {
    deleted_bytes: u64,
    /// Live leases found before a delete: deleting stopped there.
    blocked_by: Vec<String>,
}

/// Deletes the candidates that are still unreferenced, still old, and while no load runs.
async fn delete_old(
    store: &Store,
    table: &TablePaths,
    opts: &GcOptions,
    clock: &ravel_store::StoreClock,
    unreferenced: &mut [Unreferenced],
) -> Result<Deleted, GcError> {
    let retention = opts.older_than.as_secs();
    let arc = store.object_store();
    // A load may have committed since the first read: its objects are referenced now.
    let refs_now = referenced(arc, table, clock.now()).await?;
    let os = arc.as_ref();
    let mut deleted_bytes = 0;
    for u in unreferenced.iter_mut() {
        if u.age_s < retention || refs_now.keys.contains(&u.key) {
            continue;
        }
        // A load that started since the last look may be about to reuse this object.
        let blocked_by = live(&read_leases(os, table, opts.stale_lease_after, clock).await?);
        if !blocked_by.is_empty() {
            return Ok(Deleted {
                deleted_bytes,
                blocked_by,
            });
        }
        if u.staging {
            delete_staging(store, u, retention, clock)?;
            deleted_bytes += if u.deleted { u.bytes } else { 0 };
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
        u.age_s = age_s(clock.now(), meta.last_modified)
            .min(refs_now.removed.get(&u.key).copied().unwrap_or(u64::MAX));
        if u.age_s < retention {
            continue;
        }
        delete(os, &path).await?;
        tracing::info!(key = %u.key, bytes = u.bytes, age_s = u.age_s, "deleted");
        u.deleted = true;
        deleted_bytes += u.bytes;
    }
    Ok(Deleted {
        deleted_bytes,
        blocked_by: Vec::new(),
    })
}

/// Deletes a staging file if it is still there and still old (a writer may have resumed).
fn delete_staging(
    store: &Store,
    u: &mut Unreferenced,
    retention: u64,
    clock: &ravel_store::StoreClock,
) -> Result<(), GcError> {
    let err = |what| {
        let key = u.key.clone();
        move |source| GcError::Staging { what, key, source }
    };
    let Some(now) = store.staging_file(&u.key).map_err(err("reading"))? else {
        return Ok(());
    };
    u.age_s = age_s(clock.now(), now.modified);
    if u.age_s < retention {
        return Ok(());
    }
    store.remove_staging_file(&u.key).map_err(err("deleting"))?;
    tracing::info!(key = %u.key, bytes = u.bytes, age_s = u.age_s, "deleted a staging file");
    u.deleted = true;
    Ok(())
}

/// Deletes the leases of dead loads (stale) that are older than the retention.
async fn delete_stale_leases(
    os: &dyn ObjectStore,
    retention: u64,
    leases: &mut [FoundLease],
) -> Result<(), GcError> {
    for l in leases
        .iter_mut()
        .filter(|l| !l.live && l.age_s >= retention)
    {
        delete(os, &Path::from(l.key.as_str())).await?;
        tracing::info!(lease = %l.key, age_s = l.age_s, "deleted a stale lease");
        l.deleted = true;
    }
    Ok(())
}

async fn delete(os: &dyn ObjectStore, path: &Path) -> Result<(), GcError> {
    match os.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(source) => Err(GcError::Request {
            what: "deleting",
            key: path.to_string(),
            source,
        }),
    }
}
