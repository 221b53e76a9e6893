//! Delta Lake's version checksum files (`_delta_log/<version>.crc`): written after each
//! version this crate commits, and read back to check a snapshot. A checkpoint that lost an
//! `add` would otherwise give a version with fewer rows, and no error; so would an entry that
//! another writer's entry replaced.
//!
//! The file holds the version's `tableSizeBytes`, `numFiles`, `numMetadata`, `numProtocol`,
//! `metadata` and `protocol`, as Delta's protocol defines it, and the `txnId` of the commit it
//! was written for (the one its entry's `commitInfo` names); readers that do not know the file
//! ignore it.
//!
//! When a checksum file disagrees with the log replayed to its version, the evidence says which
//! is wrong ([`Culprit`]): an entry whose `commitInfo` names the file's `txnId` is the one the
//! file was written for, so the file is wrong and the log reads; an entry that names another
//! is not, so the version the file recorded was lost.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use serde::{Deserialize, Serialize};

use crate::{History, LogEntry, LogError, Metadata, Protocol, Snapshot, TableLog};

/// What a version holds, as its checksum file records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionChecksum {
    /// The commit the file was written for: its entry's `commitInfo.txnId` (`None` in files of
    /// older builds, and of engines that leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_id: Option<String>,
    pub table_size_bytes: u64,
    pub num_files: u64,
    pub num_metadata: u64,
    pub num_protocol: u64,
    pub metadata: Metadata,
    pub protocol: Protocol,
}

impl VersionChecksum {
    /// The checksum of `snapshot`, written for the commit `txn_id`; `None` before it has a
    /// protocol and metadata.
    pub fn of(snapshot: &Snapshot, txn_id: Option<String>) -> Option<VersionChecksum> {
        let counts = Counts::of(snapshot);
        Some(VersionChecksum {
            txn_id,
            table_size_bytes: counts.bytes,
            num_files: counts.files,
            num_metadata: 1,
            num_protocol: 1,
            metadata: snapshot.metadata.clone()?,
            protocol: snapshot.protocol.clone()?,
        })
    }

    /// The files and bytes it records.
    pub fn counts(&self) -> Counts {
        Counts {
            files: self.num_files,
            bytes: self.table_size_bytes,
        }
    }
}

/// The files of a version and their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub files: u64,
    pub bytes: u64,
}

impl Counts {
    pub fn of(snapshot: &Snapshot) -> Counts {
        Counts {
            files: snapshot.files().len() as u64,
            bytes: snapshot.files().values().map(|a| a.size).sum(),
        }
    }

    /// The figures of `self` that differ from `other`'s, as Delta's checksum names them, each
    /// with `other`'s figure and what `other` is: `numFiles 4 (3 replayed)`.
    pub fn differing(&self, other: Counts, other_is: &str) -> String {
        let mut out = Vec::new();
        if self.files != other.files {
            out.push(format!(
                "numFiles {} ({} {other_is})",
                self.files, other.files
            ));
        }
        if self.bytes != other.bytes {
            out.push(format!(
                "tableSizeBytes {} ({} {other_is})",
                self.bytes, other.bytes
            ));
        }
        out.join(", ")
    }
}

/// A version read from a checkpoint (and the entries after it) that a replay of the whole log
/// contradicts: the checkpoint is damaged. Readers read the replay instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointDamage {
    /// The checkpoint's file.
    pub file: String,
    /// The version read from it.
    pub version: u64,
    /// What the checkpoint and the entries after it gave.
    pub built: Counts,
    /// What the whole log replayed gives.
    pub replayed: Counts,
    /// The checksum file that caught it.
    pub checksum_file: String,
}

impl std::fmt::Display for CheckpointDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "checkpoint {}: version {} read from it has {}, which the checksum file {} contradicts: the checkpoint is damaged",
            self.file,
            self.version,
            self.built.differing(self.replayed, "in the log replayed"),
            self.checksum_file
        )
    }
}

/// What is wrong when a checksum file disagrees with the log replayed to its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Culprit {
    /// The version's entry is the one the file was written for (its `commitInfo` names the
    /// file's `txnId`), or a checkpoint of the version agrees with the replay: the file is
    /// wrong, the log reads.
    ChecksumFile,
    /// The version's entry is not the one the file was written for: another commit's entry
    /// took its place, and the version the file recorded is lost.
    Entry,
    /// The file names no commit (an older build's, another engine's): an entry lost or
    /// changed, or the file wrong.
    Unknown,
}

impl Culprit {
    /// The culprit for a file written for commit `recorded` whose version's entry names commit
    /// `entry`.
    fn of(recorded: Option<&str>, entry: Option<&str>) -> Culprit {
        match (recorded, entry) {
            (None, _) => Culprit::Unknown,
            (Some(r), Some(e)) if r == e => Culprit::ChecksumFile,
            (Some(_), _) => Culprit::Entry,
        }
    }
}

impl std::fmt::Display for Culprit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Culprit::ChecksumFile => {
                "the entry is the one it was written for, so the checksum file is wrong and the log reads"
            }
            Culprit::Entry => {
                "the entry is not the one it was written for (another commit's entry took its place): the version it recorded is lost"
            }
            Culprit::Unknown => {
                "the file names no commit to tell whether an entry was lost or changed or the file is wrong"
            }
        })
    }
}

/// A checksum file that disagrees with the log replayed to its version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChecksumDisagreement {
    /// The checksum file.
    pub file: String,
    pub version: u64,
    /// What the file records.
    pub recorded: Counts,
    /// What the log replayed to the version gives.
    pub replayed: Counts,
    pub culprit: Culprit,
}

impl ChecksumDisagreement {
    /// What the file records that the log does not, and what the evidence says: the words of
    /// a report that names the file already.
    pub fn finding(&self) -> String {
        format!(
            "records {} for version {}; {}",
            self.recorded
                .differing(self.replayed, "in the log replayed"),
            self.version,
            self.culprit
        )
    }
}

impl std::fmt::Display for ChecksumDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "checksum file {} {}", self.file, self.finding())
    }
}

impl TableLog {
    /// `_delta_log/<version>.crc`.
    pub fn checksum_path(&self, version: u64) -> Path {
        self.table.log_dir().join(format!("{version:020}.crc"))
    }

    /// Writes the checksum of `snapshot`'s version, written by commit `txn_id`. A failure is
    /// only logged: readers then check against an older one, or not at all.
    pub(crate) async fn write_checksum(&self, snapshot: &Snapshot, txn_id: Option<String>) {
        let version = snapshot.version;
        let (Some(version), Some(crc)) = (version, VersionChecksum::of(snapshot, txn_id)) else {
            return;
        };
        let json = Bytes::from(serde_json::to_vec(&crc).expect("serializes"));
        if let Err(e) = self
            .store
            .put(&self.checksum_path(version), json.into())
            .await
        {
            tracing::warn!(version, error = %ravel_store::ErrorChain::new(&e), "the version's checksum file was not written");
        }
    }

    /// The checksum file of `version`, if there is one that reads.
    pub async fn checksum(&self, version: u64) -> Result<Option<VersionChecksum>, LogError> {
        let path = self.checksum_path(version);
        match crate::get(self.store.as_ref(), &path).await {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(crc) => Ok(Some(crc)),
                Err(e) => {
                    tracing::warn!(key = %path, error = %ravel_store::ErrorChain::new(&e), "a checksum file does not read; ignored");
                    Ok(None)
                }
            },
            Err(LogError::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The newest checksum file among the versions `built` lists (newest last, with what the
    /// snapshot held at each), with the counts at its version.
    pub(crate) async fn newest_checksum(
        &self,
        built: &[(u64, Counts)],
    ) -> Result<Option<Checked>, LogError> {
        // A few tries: versions other writers committed have no checksum file.
        for &(version, counts) in built.iter().rev().take(8) {
            if let Some(crc) = self.checksum(version).await? {
                return Ok(Some(Checked {
                    version,
                    crc,
                    counts,
                }));
            }
        }
        Ok(None)
    }

    /// How `checked`'s file disagrees with the log replayed to its version (whose entry is
    /// `entry`, if read); `None` when it agrees. `witness`: a checkpoint of that version
    /// agrees with the replay.
    pub(crate) async fn disagreement(
        &self,
        checked: &Checked,
        entry: Option<&LogEntry>,
        witness: bool,
    ) -> Result<Option<ChecksumDisagreement>, LogError> {
        if checked.crc.counts() == checked.counts {
            return Ok(None);
        }
        let named = match entry {
            Some(e) => txn_id(e),
            // A checkpoint the log starts at may stand without its entry.
            None => match self.entry(checked.version).await {
                Ok(e) => txn_id(&e),
                Err(LogError::NoSuchVersion(_)) => None,
                Err(e) => return Err(e),
            },
        };
        let culprit = match witness {
            true => Culprit::ChecksumFile,
            false => Culprit::of(checked.crc.txn_id.as_deref(), named.as_deref()),
        };
        Ok(Some(ChecksumDisagreement {
            file: self.checksum_path(checked.version).to_string(),
            version: checked.version,
            recorded: checked.crc.counts(),
            replayed: checked.counts,
            culprit,
        }))
    }

    /// Every checksum file of the log that disagrees with the version `history` (the log from
    /// its start) replays to, oldest first: one LIST of the log and one GET a file. Files of
    /// versions before the checkpoint the log starts at are not read.
    pub async fn checksum_disagreements(
        &self,
        history: &History,
    ) -> Result<Vec<ChecksumDisagreement>, LogError> {
        let oldest = history.oldest().unwrap_or(0);
        let mut stored = self.checksum_versions().await?;
        stored.retain(|v| *v >= oldest);
        let reads: Vec<_> = stored
            .iter()
            .map(|&v| async move { Ok::<_, LogError>((v, self.checksum(v).await?)) })
            .collect();
        let files: std::collections::BTreeMap<u64, VersionChecksum> = futures::stream::iter(reads)
            .buffered(crate::READ_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?
            .into_iter()
            .filter_map(|(v, crc)| Some((v, crc?)))
            .collect();
        let mut s = Snapshot::default();
        let mut out = Vec::new();
        for e in history.all() {
            s.apply(e);
            let Some(crc) = files.get(&e.version) else {
                continue;
            };
            let checked = Checked {
                version: e.version,
                crc: crc.clone(),
                counts: Counts::of(&s),
            };
            // The checkpoint read as an entry names no commit: its version's entry does.
            let entry =
                (history.checkpoint.as_ref().map(|c| c.version) != Some(e.version)).then_some(e);
            out.extend(self.disagreement(&checked, entry, false).await?);
        }
        Ok(out)
    }

    /// The versions that have a checksum file, from one listing of the log.
    async fn checksum_versions(&self) -> Result<Vec<u64>, LogError> {
        let listed = self.list_log(0).await?;
        Ok(listed
            .iter()
            .filter_map(|m| crate::checksum_version(m.location.filename()))
            .collect())
    }
}

/// A checksum file read, and what the snapshot held at its version.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub(crate) version: u64,
    pub(crate) crc: VersionChecksum,
    pub(crate) counts: Counts,
}

impl Checked {
    pub(crate) fn agrees(&self) -> bool {
        self.crc.counts() == self.counts
    }
}

/// The `txnId` an entry's `commitInfo` names, if any.
pub(crate) fn txn_id(entry: &LogEntry) -> Option<String> {
    let id = entry.commit_info()?.get("txnId")?.as_str()?;
    Some(id.to_string())
}

/// Warns about `what` once per table and `key` (a checkpoint's or a checksum file's version)
/// in this process.
pub(crate) fn warn_once(table: &str, key: (&str, u64), what: &dyn std::fmt::Display) {
    static WARNED: OnceLock<Mutex<HashSet<(String, String, u64)>>> = OnceLock::new();
    let warned = WARNED.get_or_init(Default::default);
    let first = warned
        .lock()
        .map(|mut w| w.insert((table.to_string(), key.0.to_string(), key.1)))
        .unwrap_or(true);
    if first {
        tracing::warn!(table, "{what}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_evidence_names_what_is_wrong() {
        assert_eq!(Culprit::of(Some("a"), Some("a")), Culprit::ChecksumFile);
        assert_eq!(Culprit::of(Some("a"), Some("b")), Culprit::Entry);
        assert_eq!(Culprit::of(Some("a"), None), Culprit::Entry);
        assert_eq!(Culprit::of(None, Some("a")), Culprit::Unknown);
        let d = ChecksumDisagreement {
            file: "t/_delta_log/00000000000000000002.crc".into(),
            version: 2,
            recorded: Counts {
                files: 4,
                bytes: 40,
            },
            replayed: Counts {
                files: 3,
                bytes: 40,
            },
            culprit: Culprit::ChecksumFile,
        };
        assert_eq!(
            d.to_string(),
            "checksum file t/_delta_log/00000000000000000002.crc records numFiles 4 (3 in the log replayed) for version 2; the entry is the one it was written for, so the checksum file is wrong and the log reads"
        );
    }
}
