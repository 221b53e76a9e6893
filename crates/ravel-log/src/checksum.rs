//! Delta Lake's version checksum files (`_delta_log/<version>.crc`): written after each
//! version this crate commits, and read back to check a snapshot built from a checkpoint. A
//! checkpoint that lost an `add` would otherwise give a version with fewer rows, and no error.
//!
//! The file holds the version's `tableSizeBytes`, `numFiles`, `numMetadata`, `numProtocol`,
//! `metadata` and `protocol`, as Delta's protocol defines it; readers that do not know the file
//! ignore it.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use serde::{Deserialize, Serialize};

use crate::{LogError, Metadata, Protocol, Snapshot, TableLog};

/// What a version holds, as its checksum file records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionChecksum {
    pub table_size_bytes: u64,
    pub num_files: u64,
    pub num_metadata: u64,
    pub num_protocol: u64,
    pub metadata: Metadata,
    pub protocol: Protocol,
}

impl VersionChecksum {
    /// The checksum of `snapshot`; `None` before it has a protocol and metadata.
    pub fn of(snapshot: &Snapshot) -> Option<VersionChecksum> {
        let counts = Counts::of(snapshot);
        Some(VersionChecksum {
            table_size_bytes: counts.bytes,
            num_files: counts.files,
            num_metadata: 1,
            num_protocol: 1,
            metadata: snapshot.metadata.clone()?,
            protocol: snapshot.protocol.clone()?,
        })
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
}

/// A snapshot built from a checkpoint that its version's checksum contradicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChecksumMismatch {
    /// The checkpoint the snapshot started from.
    pub checkpoint: u64,
    /// The version whose checksum was read.
    pub version: u64,
    /// What the checksum file says.
    pub recorded: Counts,
    /// What the checkpoint and the entries after it gave.
    pub built: Counts,
}

impl std::fmt::Display for ChecksumMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "version {} read from checkpoint {} has {} files of {} bytes, its checksum file records {} files of {} bytes",
            self.version,
            self.checkpoint,
            self.built.files,
            self.built.bytes,
            self.recorded.files,
            self.recorded.bytes
        )
    }
}

impl TableLog {
    /// `_delta_log/<version>.crc`.
    pub fn checksum_path(&self, version: u64) -> Path {
        self.table.log_dir().join(format!("{version:020}.crc"))
    }

    /// Writes the checksum of `snapshot`'s version. A failure is only logged: readers then
    /// check against an older one, or not at all.
    pub(crate) async fn write_checksum(&self, snapshot: &Snapshot) {
        let (Some(version), Some(crc)) = (snapshot.version, VersionChecksum::of(snapshot)) else {
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

    /// Checks a snapshot built from checkpoint `checkpoint` against the newest checksum file
    /// among the versions `built` lists (newest last, with what the snapshot held at each).
    pub(crate) async fn check_built(
        &self,
        checkpoint: u64,
        built: &[(u64, Counts)],
    ) -> Result<Option<ChecksumMismatch>, LogError> {
        // A few tries: versions other writers committed have no checksum file.
        for &(version, counts) in built.iter().rev().take(8) {
            let Some(crc) = self.checksum(version).await? else {
                continue;
            };
            let recorded = Counts {
                files: crc.num_files,
                bytes: crc.table_size_bytes,
            };
            return Ok((recorded != counts).then_some(ChecksumMismatch {
                checkpoint,
                version,
                recorded,
                built: counts,
            }));
        }
        Ok(None)
    }
}

/// Warns about `mismatch` once per table and checkpoint in this process.
pub(crate) fn warn_once(table: &str, mismatch: &ChecksumMismatch) {
    static WARNED: OnceLock<Mutex<HashSet<(String, u64)>>> = OnceLock::new();
    let warned = WARNED.get_or_init(Default::default);
    let first = warned
        .lock()
        .map(|mut w| w.insert((table.to_string(), mismatch.checkpoint)))
        .unwrap_or(true);
    if first {
        tracing::warn!(
            table,
            "{mismatch}: the checkpoint is damaged; replaying the whole log instead (verify reports it; the next checkpoint replaces it)"
        );
    }
}
