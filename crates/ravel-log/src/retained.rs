//! Where a table's log starts. A log that was never cleaned holds every entry from version 0. One
//! whose log window expired entries ([`crate::ExpiredLog`]) starts at a checkpoint: readers start
//! from the oldest checkpoint it keeps and replay the entries after it, and a version before that
//! checkpoint is no longer readable ([`LogError::Cleaned`]).
//!
//! A cleanup deletes the oldest versions first, so a cleanup killed part-way leaves entries from
//! some version on, before the checkpoint it cleaned to: the log still starts at the oldest
//! checkpoint at or after its oldest entry. Entries missing anywhere else are a gap
//! ([`LogError::Gap`]), and a checksum file after that checkpoint without its entry is a lost
//! entry ([`LogError::LostEntry`]), as in a log that was never cleaned.

use std::collections::BTreeSet;

use object_store::ObjectMeta;

use crate::{LogEntry, LogError, Snapshot, TableLog, decode_checkpoint};

/// The kind of a file of `_delta_log`, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LogFileKind {
    /// `<version>.crc`. Deleted first of a version's files.
    Checksum,
    /// `<version>.checkpoint.parquet`, the checkpoints this build writes and starts from.
    Checkpoint,
    /// A checkpoint in parts, or in another engine's form (`<version>.checkpoint.<…>.parquet`).
    CheckpointPart,
    /// `<version>.json`. Deleted last of a version's files.
    Entry,
}

/// The version and kind of a file of `_delta_log` named `name`, if it is a version's file.
pub(crate) fn log_file(name: &str) -> Option<(u64, LogFileKind)> {
    let (stem, rest) = name.split_at_checked(20)?;
    let version = crate::version_of(stem)?;
    let kind = match rest {
        ".json" => LogFileKind::Entry,
        ".crc" => LogFileKind::Checksum,
        ".checkpoint.parquet" => LogFileKind::Checkpoint,
        r if r.starts_with(".checkpoint.") && r.ends_with(".parquet") => {
            LogFileKind::CheckpointPart
        }
        _ => return None,
    };
    Some((version, kind))
}

/// The versions one listing of the log found files of.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    entries: BTreeSet<u64>,
    checksums: BTreeSet<u64>,
    checkpoints: BTreeSet<u64>,
}

impl Listed {
    pub(crate) fn of(listed: &[ObjectMeta]) -> Listed {
        let mut out = Listed::default();
        for m in listed {
            let Some((version, kind)) = m.location.filename().and_then(log_file) else {
                continue;
            };
            match kind {
                LogFileKind::Entry => out.entries.insert(version),
                LogFileKind::Checksum => out.checksums.insert(version),
                LogFileKind::Checkpoint => out.checkpoints.insert(version),
                LogFileKind::CheckpointPart => false,
            };
        }
        out
    }
}

/// What readers of a log listed from one version on read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Readable {
    /// The checkpoint readers start from, when the entries before it were cleaned.
    pub(crate) checkpoint: Option<u64>,
    /// The entries readers replay (after the checkpoint), oldest first.
    pub(crate) entries: Vec<u64>,
}

impl Readable {
    /// Every readable version, oldest first.
    pub(crate) fn versions(&self) -> Vec<u64> {
        self.checkpoint
            .iter()
            .chain(&self.entries)
            .copied()
            .collect()
    }
}

/// What a listing of the log from version `first` on lets readers read: from `first`, or from
/// the oldest checkpoint at or after the oldest listed entry when the entries before it were
/// cleaned. Fails on a checksum file after that start without its entry, and on a gap.
pub(crate) fn readable(listed: &Listed, first: u64) -> Result<Readable, LogError> {
    let all: Vec<u64> = listed.entries.range(first..).copied().collect();
    let checkpoint = match (all.first(), all.last()) {
        (Some(&oldest), Some(&newest)) if oldest > first => {
            let start = oldest.saturating_sub(1).max(first);
            let found = listed.checkpoints.range(start..=newest).next().copied();
            Some(found.ok_or(LogError::Gap {
                missing: first,
                newest,
            })?)
        }
        _ => None,
    };
    let after = checkpoint.map_or(first, |c| c + 1);
    let entries: Vec<u64> = all.into_iter().filter(|v| *v >= after).collect();
    // A checksum file is written after its entry: one without the entry means the entry was
    // lost (deleted), and the versions from it on with it.
    let lost = listed
        .checksums
        .range(after..)
        .find(|v| entries.binary_search(v).is_err());
    if let Some(&version) = lost {
        return Err(LogError::LostEntry { version });
    }
    for (i, v) in entries.iter().enumerate() {
        if *v != after + i as u64 {
            return Err(LogError::Gap {
                missing: after + i as u64,
                newest: *entries.last().expect("not empty"),
            });
        }
    }
    Ok(Readable {
        checkpoint,
        entries,
    })
}

/// The log as readers read it from its start: the oldest checkpoint it keeps when the entries
/// before it were cleaned, and the entries after it (see [`TableLog::history`]).
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The oldest checkpoint the log keeps, read as the entry of its version (its actions: the
    /// table as that version left it), when the entries before it were cleaned; `None` when
    /// the log holds every entry from version 0.
    pub checkpoint: Option<LogEntry>,
    /// The entries after it, oldest first.
    pub entries: Vec<LogEntry>,
}

impl History {
    /// The checkpoint (read as an entry), then every entry after it.
    pub fn all(&self) -> impl Iterator<Item = &LogEntry> {
        self.checkpoint.iter().chain(&self.entries)
    }

    /// The table the entries apply to: the checkpoint's version, or no version.
    pub fn start(&self) -> Snapshot {
        let mut s = Snapshot::default();
        if let Some(c) = &self.checkpoint {
            s.apply(c);
        }
        s
    }

    /// The newest version, replayed from the start.
    pub fn replay(&self) -> Snapshot {
        let mut s = self.start();
        self.entries.iter().for_each(|e| s.apply(e));
        s
    }

    /// The oldest readable version.
    pub fn oldest(&self) -> Option<u64> {
        self.all().next().map(|e| e.version)
    }

    /// The readable versions.
    pub fn len(&self) -> usize {
        self.entries.len() + usize::from(self.checkpoint.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl TableLog {
    /// What readers read of the log from its start: the checkpoint it starts at (when entries
    /// before one were cleaned) and the entries after it. Listed again when a checksum file
    /// showed without its entry (a commit in progress may show so in one listing).
    pub(crate) async fn retained(&self) -> Result<Readable, LogError> {
        self.readable_from(0).await
    }

    /// [`TableLog::retained`] of the log from version `first` on.
    pub(crate) async fn readable_from(&self, first: u64) -> Result<Readable, LogError> {
        for _ in 0..3 {
            match self.list_readable(first).await {
                Err(LogError::LostEntry { version }) if self.entry_stored(version).await? => {}
                other => return other,
            }
        }
        self.list_readable(first).await
    }

    async fn list_readable(&self, first: u64) -> Result<Readable, LogError> {
        let listed = self.list_log(first).await?;
        readable(&Listed::of(&listed), first)
    }

    /// The checkpoint of `version`, read as the entry of that version.
    pub async fn checkpoint_entry(&self, version: u64) -> Result<LogEntry, LogError> {
        let bytes = crate::get(self.store.as_ref(), &self.checkpoint_path(version)).await?;
        Ok(LogEntry {
            version,
            actions: decode_checkpoint(bytes)?,
        })
    }

    /// The log from its start (see [`History`]).
    pub async fn history(&self) -> Result<History, LogError> {
        let r = self.retained().await?;
        let checkpoint = match r.checkpoint {
            Some(c) => Some(self.checkpoint_entry(c).await?),
            None => None,
        };
        Ok(History {
            checkpoint,
            entries: self.entries(&r.entries).await?,
        })
    }

    /// The table as version `version` left it: from the checkpoint the log starts at (if it
    /// was cleaned), the entries after it up to `version`. A version before that checkpoint
    /// fails with [`LogError::Cleaned`].
    pub async fn at(&self, version: u64) -> Result<Snapshot, LogError> {
        let r = self.retained().await?;
        if r.checkpoint.is_none() && r.entries.is_empty() && version == 0 {
            let s = self.read_legacy().await?;
            if s.version.is_some() {
                return Ok(s);
            }
        }
        if let Some(oldest) = r.checkpoint.filter(|c| version < *c) {
            return Err(LogError::Cleaned { version, oldest });
        }
        if !r.versions().contains(&version) {
            return Err(LogError::NoSuchVersion(version));
        }
        let mut s = Snapshot::default();
        if let Some(c) = r.checkpoint {
            s.apply(&self.checkpoint_entry(c).await?);
        }
        let upto: Vec<u64> = r.entries.into_iter().filter(|v| *v <= version).collect();
        for e in self.entries(&upto).await? {
            s.apply(&e);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(entries: &[u64], checksums: &[u64], checkpoints: &[u64]) -> Listed {
        Listed {
            entries: entries.iter().copied().collect(),
            checksums: checksums.iter().copied().collect(),
            checkpoints: checkpoints.iter().copied().collect(),
        }
    }

    fn read(entries: &[u64], checksums: &[u64], checkpoints: &[u64]) -> Result<Readable, String> {
        readable(&listed(entries, checksums, checkpoints), 0).map_err(|e| e.to_string())
    }

    #[test]
    fn a_cleaned_log_starts_at_its_oldest_checkpoint_and_a_gap_elsewhere_is_an_error() {
        let all: Vec<u64> = (0..25).collect();
        let whole = read(&all, &all, &[10, 20]).unwrap();
        assert_eq!((whole.checkpoint, whole.entries.len()), (None, 25));
        // Cleaned to 20; a cleanup killed after version 4's entry; after 12's checksum file.
        let cases = [(20, 20), (5, 10), (13, 20)];
        for (oldest, start) in cases {
            let entries: Vec<u64> = (oldest..25).collect();
            let r = read(
                &entries,
                &(oldest.max(13)..25).collect::<Vec<_>>(),
                &[10, 20],
            );
            let r = r.unwrap();
            assert_eq!(r.checkpoint, Some(start), "entries from {oldest}");
            assert_eq!(r.versions(), (start..25).collect::<Vec<_>>());
        }
        // Checksum files below the start (an engine that deletes entries first) are no loss.
        let r = read(&(20..25).collect::<Vec<_>>(), &all, &[20]).unwrap();
        assert_eq!(r.checkpoint, Some(20));
        // A gap no checkpoint explains: entries from 5 on and no checkpoint after them.
        let err = read(&(5..25).collect::<Vec<_>>(), &[], &[]).unwrap_err();
        assert!(err.contains("no version 0"), "{err}");
        // A hole after the start checkpoint.
        let mut holed: Vec<u64> = (20..25).collect();
        holed.retain(|v| *v != 22);
        let err = read(&holed, &[], &[20]).unwrap_err();
        assert!(err.contains("no version 22"), "{err}");
        // The newest entry deleted, its checksum file kept: lost, cleaned or not.
        for start in [0, 20] {
            let entries: Vec<u64> = (start..24).collect();
            let err = readable(&listed(&entries, &[24], &[20]), 0).unwrap_err();
            assert!(matches!(err, LogError::LostEntry { version: 24 }), "{err}");
        }
    }

    #[test]
    fn log_files_are_named_by_version_and_kind() {
        let v = "00000000000000000007";
        assert_eq!(
            log_file(&format!("{v}.json")),
            Some((7, LogFileKind::Entry))
        );
        assert_eq!(
            log_file(&format!("{v}.crc")),
            Some((7, LogFileKind::Checksum))
        );
        assert_eq!(
            log_file(&format!("{v}.checkpoint.parquet")),
            Some((7, LogFileKind::Checkpoint))
        );
        assert_eq!(
            log_file(&format!("{v}.checkpoint.0000000001.0000000002.parquet")),
            Some((7, LogFileKind::CheckpointPart))
        );
        for other in ["_last_checkpoint", "7.json", &format!("{v}.json.tmp")] {
            assert_eq!(log_file(other), None, "{other}");
        }
    }
}
