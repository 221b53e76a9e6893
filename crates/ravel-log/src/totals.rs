//! Running totals of what the table cost to write: every entry's `commitInfo` carries them
//! (`ravel.totals`), so the newest entry alone tells how many bytes loads stored and how many
//! compactions and maintenance wrote, since the table began and since its last full
//! compaction.

use serde::{Deserialize, Serialize};

use crate::{LogEntry, LogError, Snapshot, TableLog};

/// Bytes stored by loads and by merges, as of one version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Bytes of objects loads published.
    pub loaded_bytes: u64,
    /// Bytes compactions and maintenance stored (intermediate objects included).
    pub written_bytes: u64,
    /// `loaded_bytes` since the last commit that left the table one sequence.
    pub loaded_since_full_bytes: u64,
    /// `written_bytes` since then.
    pub written_since_full_bytes: u64,
}

impl Totals {
    /// Merge bytes written per byte loaded since the last full compaction (0 before any load).
    pub fn write_amplification(&self) -> f64 {
        ratio(self.written_since_full_bytes, self.loaded_since_full_bytes)
    }

    /// The totals after a commit that loaded `loaded` bytes and wrote `written` merging; a
    /// commit that leaves the table one sequence (`full`) starts the since-full figures over.
    pub fn after(self, loaded: u64, written: u64, full: bool) -> Totals {
        let mut t = Totals {
            loaded_bytes: self.loaded_bytes + loaded,
            written_bytes: self.written_bytes + written,
            loaded_since_full_bytes: self.loaded_since_full_bytes + loaded,
            written_since_full_bytes: self.written_since_full_bytes + written,
        };
        if full {
            t.loaded_since_full_bytes = 0;
            t.written_since_full_bytes = 0;
        }
        t
    }

    /// The totals an entry's `commitInfo` records, if it records them.
    pub fn of_entry(entry: &LogEntry) -> Option<Totals> {
        let info = entry.commit_info()?;
        serde_json::from_value(info.get("ravel")?.get("totals")?.clone()).ok()
    }
}

/// `a / b`, 0 when `b` is 0.
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl TableLog {
    /// The totals as of `snapshot`: from the entries it replayed, else from its own entry (a
    /// snapshot read from a checkpoint); zero for a table whose entries record none.
    pub async fn totals(&self, snapshot: &Snapshot) -> Result<Totals, LogError> {
        if let Some(t) = snapshot.totals {
            return Ok(t);
        }
        let Some(version) = snapshot.version.filter(|_| !snapshot.from_manifests) else {
            return Ok(Totals::default());
        };
        let entry = self.entry(version).await?;
        Ok(Totals::of_entry(&entry).unwrap_or_default())
    }
}
