//! Delta's expired-log cleanup: the files of log versions that a checkpoint covers and that are
//! older than the table's log window (`delta.logRetentionDuration`) are deleted.
//!
//! A version's age is its files' last-modified time, as Delta and delta-rs date them (one
//! listing dates every file; a copied log's files are younger, so a copy keeps more). The
//! cleanup finds the newest checkpoint `C` (`<C>.checkpoint.parquet`, no newer than the one
//! `_last_checkpoint` names) such that every file of every version up to `C` is older than the
//! window, and deletes every file of every version before `C`: entries, checksum files and
//! checkpoints. `C`, `_last_checkpoint`, and every file from `C` on stay, so readers of the
//! newest version and of every version from `C` on read as before; the log then starts at `C`
//! ([`crate::History`]).
//!
//! Before deleting, `C` is compared with the log replayed to its version: a checkpoint that
//! does not hold the objects the log gives would become the only record of those versions, so
//! nothing is deleted ([`ExpiredLog::refused`]).
//!
//! Files are deleted oldest version first and, of a version, its checksum file, its
//! checkpoints, then its entry: a cleanup killed at any moment leaves entries from some version
//! on and the checkpoint `C`, which readers start from, and never a checksum file without its
//! entry after it.

use std::collections::BTreeMap;

use object_store::{ObjectMeta, ObjectStoreExt};
use serde::Serialize;

use crate::retained::{LogFileKind, log_file};
use crate::{LastCheckpoint, LogError, Snapshot, TableLog};

/// One file of the log that a cleanup deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogFile {
    /// Its path in the store.
    pub key: String,
    pub version: u64,
    pub bytes: u64,
}

/// What the log window expired: the files of the versions before a checkpoint (see the module
/// docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExpiredLog {
    /// The checkpoint the log starts at once the files are deleted; `None` when none expired.
    pub checkpoint: Option<u64>,
    /// The files, in the order they are deleted: oldest version first; of each version, its
    /// checksum file, its checkpoints, its entry.
    pub files: Vec<LogFile>,
    /// Why no file is deleted though the window expired some: the checkpoint the log would
    /// start at disagrees with the log replayed to its version.
    pub refused: Option<String>,
}

impl ExpiredLog {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

/// What [`TableLog::delete_expired`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeletedLog {
    pub files: usize,
    pub bytes: u64,
}

/// The files of one version, dated.
#[derive(Debug, Default)]
struct VersionFiles {
    files: Vec<(LogFileKind, ObjectMeta)>,
}

impl VersionFiles {
    /// Whether every file of the version was last modified at or before `cutoff_ms`.
    fn expired(&self, cutoff_ms: i64) -> bool {
        self.files
            .iter()
            .all(|(_, m)| m.last_modified.timestamp_millis() <= cutoff_ms)
    }

    fn has_checkpoint(&self) -> bool {
        self.files
            .iter()
            .any(|(k, _)| *k == LogFileKind::Checkpoint)
    }
}

/// The log's version files by version (other files of `_delta_log` are never deleted).
fn by_version(listed: Vec<ObjectMeta>) -> BTreeMap<u64, VersionFiles> {
    let mut out: BTreeMap<u64, VersionFiles> = BTreeMap::new();
    for m in listed {
        if let Some((version, kind)) = m.location.filename().and_then(log_file) {
            out.entry(version).or_default().files.push((kind, m));
        }
    }
    for v in out.values_mut() {
        v.files.sort_by_key(|(kind, _)| *kind);
    }
    out
}

/// The newest checkpoint no newer than `last` such that every version up to it expired.
fn newest_expired_checkpoint(
    versions: &BTreeMap<u64, VersionFiles>,
    cutoff_ms: i64,
    last: u64,
) -> Option<u64> {
    let mut found = None;
    for (&v, files) in versions.range(..=last) {
        if !files.expired(cutoff_ms) {
            break;
        }
        if files.has_checkpoint() {
            found = Some(v);
        }
    }
    found
}

impl TableLog {
    /// The log files that a log window of `window_ms` has expired at `now_ms` (Unix
    /// milliseconds, by the store's clock): see the module docs. Reads nothing but the listing
    /// and `_last_checkpoint` when none expired.
    pub async fn expired_log(&self, now_ms: i64, window_ms: i64) -> Result<ExpiredLog, LogError> {
        let Some(last) = self.last_checkpoint_version().await? else {
            return Ok(ExpiredLog::default());
        };
        let versions = by_version(self.list_log(0).await?);
        let cutoff_ms = now_ms.saturating_sub(window_ms);
        let Some(checkpoint) = newest_expired_checkpoint(&versions, cutoff_ms, last) else {
            return Ok(ExpiredLog::default());
        };
        let files: Vec<LogFile> = versions
            .range(..checkpoint)
            .flat_map(|(&version, v)| {
                v.files.iter().map(move |(_, m)| LogFile {
                    key: m.location.to_string(),
                    version,
                    bytes: m.size,
                })
            })
            .collect();
        if files.is_empty() {
            return Ok(ExpiredLog::default());
        }
        let refused = self.checkpoint_disagrees(checkpoint).await?;
        Ok(match refused {
            Some(why) => ExpiredLog {
                refused: Some(why),
                ..ExpiredLog::default()
            },
            None => ExpiredLog {
                checkpoint: Some(checkpoint),
                files,
                refused: None,
            },
        })
    }

    /// Deletes `expired`'s files, in its order (a file already gone counts as deleted by
    /// another run, not by this one).
    pub async fn delete_expired(&self, expired: &ExpiredLog) -> Result<DeletedLog, LogError> {
        let mut deleted = DeletedLog::default();
        for f in &expired.files {
            let path = object_store::path::Path::from(f.key.as_str());
            match self.store.delete(&path).await {
                Ok(()) => {}
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(source) => {
                    return Err(LogError::Store {
                        what: "deleting",
                        key: f.key.clone(),
                        source,
                    });
                }
            }
            tracing::debug!(key = %f.key, version = f.version, "deleted an expired log file");
            deleted.files += 1;
            deleted.bytes += f.bytes;
        }
        Ok(deleted)
    }

    /// The version `_last_checkpoint` names, if it is there and reads.
    async fn last_checkpoint_version(&self) -> Result<Option<u64>, LogError> {
        let path = self.last_checkpoint_path();
        match crate::get(self.store.as_ref(), &path).await {
            Ok(bytes) => Ok(serde_json::from_slice::<LastCheckpoint>(&bytes)
                .ok()
                .map(|l| l.version)),
            Err(LogError::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Why the checkpoint of `version` may not start the log: the objects it holds differ from
    /// those the log replayed to its version holds. `None` when they agree.
    async fn checkpoint_disagrees(&self, version: u64) -> Result<Option<String>, LogError> {
        let history = self.history().await?;
        let mut replayed = history.start();
        for e in history.entries.iter().filter(|e| e.version <= version) {
            replayed.apply(e);
        }
        let mut held = Snapshot::default();
        held.apply(&self.checkpoint_entry(version).await?);
        let sizes = |s: &Snapshot| -> BTreeMap<String, u64> {
            s.files().iter().map(|(p, a)| (p.clone(), a.size)).collect()
        };
        if replayed.version == Some(version) && sizes(&replayed) == sizes(&held) {
            return Ok(None);
        }
        let why = format!(
            "checkpoint {} holds {} object(s) and the log replayed to version {version} {}: the entries before it are kept (verify reports the checkpoint)",
            self.checkpoint_path(version),
            held.files().len(),
            replayed.files().len(),
        );
        tracing::warn!(table = self.table.name(), "{why}");
        Ok(Some(why))
    }
}
