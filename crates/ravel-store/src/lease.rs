//! Leases: how a running load and `gc` exclude each other.
//!
//! A load's objects are unreferenced until its manifest is written, so an age alone cannot tell
//! `gc` whether an unreferenced object is an orphan or part of a load still running. Before its
//! first upload a load therefore writes a lease, `<table>/_leases/<lease id>.json`, rewrites it
//! every [`HEARTBEAT`] while it runs, and deletes it after its commit (or when it gives up).
//!
//! A lease is **live** while its last write (the store's own time of it, against the store's
//! clock now, see [`crate::StoreClock`]: the clocks of the loading machine and of the machine
//! `gc` runs on do not count) is younger than the staleness bound ([`STALE_AFTER`]
//! unless the caller says otherwise), and its holder is not known to be dead: a lease written
//! by a process of this host (same host name) that no longer runs is stale at once, so that a
//! load killed on this machine does not block `gc` for the whole bound. A lease dated ahead of
//! the store's clock by more than the bound is stale too: no running load wrote it. While any live lease
//! exists `gc` deletes nothing and names the loads that block it; stale leases it reports and
//! deletes like old orphans.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::TablePaths;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often a running load rewrites its lease.
pub const HEARTBEAT: Duration = Duration::from_secs(30);

/// A lease not rewritten for this long is stale: its load was killed or lost the store. Twenty
/// heartbeats, so that a store that is slow or briefly unreachable does not make a running load
/// look dead.
pub const STALE_AFTER: Duration = Duration::from_secs(600);

/// Format of the leases this build writes.
pub const LEASE_FORMAT: u32 = 1;

/// What a lease says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub format: u32,
    /// The lease's id (its file name without `.json`).
    pub id: String,
    /// Host name of the holder's machine.
    pub host: String,
    /// Process id of the holder on that host.
    pub pid: u32,
    /// Unix milliseconds, holder's clock: when the load took the lease.
    pub started_ms: u64,
    /// Unix milliseconds, holder's clock: the lease's last write.
    pub heartbeat_ms: u64,
}

/// Why a lease could not be taken or read.
#[derive(Debug, thiserror::Error)]
#[error("{what} lease {key}")]
pub struct LeaseError {
    pub what: &'static str,
    pub key: String,
    #[source]
    pub source: object_store::Error,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// This machine's host name, empty when unknown (then no lease is judged by its process).
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Whether `lease`'s holder is a process of this host that no longer runs. Only Linux can tell
/// (through /proc); elsewhere every holder may be alive and only the staleness bound counts.
pub fn holder_is_dead(lease: &Lease, host: &str) -> bool {
    if host.is_empty() || lease.host != host || !cfg!(target_os = "linux") {
        return false;
    }
    !std::path::Path::new(&format!("/proc/{}", lease.pid)).exists()
}

/// A lease held by a running load: rewritten by a task every [`HEARTBEAT`] until
/// [`HeldLease::release`] deletes it. Dropped without a release (a load abandoned), it stops the
/// heartbeat and deletes the lease in the background when a runtime is there to do it;
/// otherwise the lease goes stale.
pub struct HeldLease {
    store: Arc<dyn ObjectStore>,
    path: Path,
    stop: watch::Sender<bool>,
    heartbeat: Option<JoinHandle<()>>,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A name no other lease or operation of any process on any host takes: the time, the process,
/// a sequence number within it, and a tag of the host.
pub fn unique_id() -> String {
    unique_id_at(now_ms(), &this_host())
}

fn unique_id_at(ms: u64, host: &str) -> String {
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!(
        "{ms:013}-{}-{seq}-{:08x}",
        std::process::id(),
        host_tag(host)
    )
}

impl HeldLease {
    /// Writes a new lease for `table` under a name unique to this load (a plain put: a retried
    /// request that finds its own first attempt stored must not fail) and starts its heartbeat.
    /// Call from a tokio runtime.
    pub async fn acquire(
        store: Arc<dyn ObjectStore>,
        table: &TablePaths,
    ) -> Result<HeldLease, LeaseError> {
        let started_ms = now_ms();
        let pid = std::process::id();
        let host = this_host();
        let id = unique_id_at(started_ms, &host);
        let lease = Lease {
            format: LEASE_FORMAT,
            id: id.clone(),
            host,
            pid,
            started_ms,
            heartbeat_ms: started_ms,
        };
        let path = table.lease(&id);
        write(store.as_ref(), &path, &lease)
            .await
            .map_err(|source| LeaseError {
                what: "writing",
                key: path.to_string(),
                source,
            })?;
        tracing::debug!(lease = %path, "lease taken");
        let (stop, stopped) = watch::channel(false);
        let heartbeat = tokio::spawn(beat(store.clone(), path.clone(), lease, stopped));
        Ok(HeldLease {
            store,
            path,
            stop,
            heartbeat: Some(heartbeat),
        })
    }

    /// The lease's key in the store.
    pub fn key(&self) -> &Path {
        &self.path
    }

    /// Stops the heartbeat (after its write in flight, if any, so that no write lands after the
    /// delete) and deletes the lease. A failed delete is logged: the lease then goes stale.
    pub async fn release(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.heartbeat.take() {
            let _ = task.await;
        }
        match self.store.delete(&self.path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                tracing::debug!(lease = %self.path, "lease released")
            }
            Err(e) => {
                tracing::warn!(lease = %self.path, error = %crate::ErrorChain::new(&e), "could not delete the lease; it goes stale")
            }
        }
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        let Some(task) = self.heartbeat.take() else {
            return; // released
        };
        let _ = self.stop.send(true);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (store, path) = (self.store.clone(), self.path.clone());
            runtime.spawn(async move {
                let _ = task.await;
                let _ = store.delete(&path).await;
            });
        } else {
            task.abort();
        }
    }
}

/// A short tag of the host name, so that two hosts' loads of the same millisecond and process
/// id get different lease names.
fn host_tag(host: &str) -> u32 {
    // FNV-1a: stable across builds, unlike std's hasher.
    host.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

async fn write(
    store: &dyn ObjectStore,
    path: &Path,
    lease: &Lease,
) -> Result<(), object_store::Error> {
    let json = serde_json::to_vec_pretty(lease).expect("a lease serializes");
    store.put(path, PutPayload::from(json)).await.map(|_| ())
}

/// Rewrites the lease every [`HEARTBEAT`] until told to stop. A failed write is logged and
/// retried on the next beat: the lease goes stale only after [`STALE_AFTER`] without one.
async fn beat(
    store: Arc<dyn ObjectStore>,
    path: Path,
    mut lease: Lease,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(HEARTBEAT) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        lease.heartbeat_ms = now_ms();
        if let Err(e) = write(store.as_ref(), &path, &lease).await {
            tracing::warn!(lease = %path, error = %crate::ErrorChain::new(&e), "lease heartbeat failed");
        }
    }
}

/// A lease found in the store, as `gc` judges it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FoundLease {
    pub key: String,
    /// What the lease says, when it is readable.
    pub lease: Option<Lease>,
    /// Seconds since its last write, by the store's time.
    pub age_s: u64,
    /// Seconds its last write lies ahead of the store's clock now (0 for a lease written in the
    /// past). A lease dated further ahead than the staleness bound is no running load's
    /// heartbeat (a hand, a copy or a clock set wrong wrote it): it is stale.
    pub ahead_s: u64,
    /// The time its writer wrote inside it minus the store's time of the write, in seconds:
    /// beyond [`crate::SKEW_BOUND`] the writer's clock is off (logged; ages are by the store's).
    pub writer_skew_s: i64,
    /// It blocks `gc`: younger than the staleness bound and its holder not known to be dead.
    pub live: bool,
    /// Its holder is a process of this host that no longer runs.
    pub holder_dead: bool,
    /// Deleted by this `gc` run (stale and past the retention).
    pub deleted: bool,
}

/// Reads the leases of `table` and judges each against `stale_after`, by the store's `clock`.
pub async fn read_leases(
    store: &dyn ObjectStore,
    table: &TablePaths,
    stale_after: Duration,
    clock: &crate::StoreClock,
) -> Result<Vec<FoundLease>, LeaseError> {
    let dir = table.leases_dir();
    let listed: Vec<object_store::ObjectMeta> = store
        .list(Some(&dir))
        .try_collect()
        .await
        .map_err(|source| LeaseError {
            what: "listing",
            key: dir.to_string(),
            source,
        })?;
    let host = this_host();
    let mut found = Vec::with_capacity(listed.len());
    for meta in listed {
        let lease = match store.get(&meta.location).await {
            Ok(got) => got.bytes().await.ok(),
            // Released between the listing and the read: the load is over.
            Err(object_store::Error::NotFound { .. }) => continue,
            Err(source) => {
                return Err(LeaseError {
                    what: "reading",
                    key: meta.location.to_string(),
                    source,
                });
            }
        }
        .and_then(|bytes| serde_json::from_slice::<Lease>(&bytes).ok());
        let since = (clock.now() - meta.last_modified).num_seconds();
        let (age_s, ahead_s) = (since.max(0) as u64, (-since).max(0) as u64);
        let holder_dead = lease.as_ref().is_some_and(|l| holder_is_dead(l, &host));
        let writer_skew_s = lease.as_ref().map_or(0, |l| {
            (l.heartbeat_ms as i64 - meta.last_modified.timestamp_millis()) / 1000
        });
        if writer_skew_s.unsigned_abs() > crate::SKEW_BOUND.as_secs() {
            tracing::warn!(lease = %meta.location, writer_skew_s, "the clock of the lease's writer is off from the store's; its age is by the store's clock");
        }
        found.push(FoundLease {
            key: meta.location.to_string(),
            lease,
            age_s,
            // An unreadable lease counts as live until stale: it may be a newer build's.
            live: age_s < stale_after.as_secs() && ahead_s <= stale_after.as_secs() && !holder_dead,
            ahead_s,
            writer_skew_s,
            holder_dead,
            deleted: false,
        });
    }
    found.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(found)
}
