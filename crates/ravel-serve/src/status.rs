//! What the service tells about each table: the JSON of `/v1/tables`, and the figures the
//! metrics carry.

use serde::Serialize;

/// One table as the service sees it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableStatus {
    pub name: String,
    pub store: String,
    pub landing: String,
    /// The service has read the table's log since it started: until then, its figures are
    /// unknown (not zero).
    pub polled: bool,
    /// The newest version read; `None` before the first load.
    pub version: Option<u64>,
    pub rows: u64,
    pub objects: usize,
    pub stored_bytes: u64,
    /// The deepest overlap of the table's objects, and the bound its policy keeps.
    pub depth: usize,
    pub depth_bound: Option<usize>,
    /// Bytes merges wrote over bytes loads published since the table was last one sequence.
    pub write_amplification: f64,
    pub pending_files: usize,
    /// The landing cursor: keys up to it are not listed (`cursor_lookback`).
    pub cursor: Option<String>,
    pub pending_bytes: u64,
    /// Seconds since this process last published a load into the table (at the request).
    pub seconds_since_last_load: Option<f64>,
    /// When it did, seconds since the Unix epoch.
    pub last_load_at: Option<f64>,
    pub loads: u64,
    pub merges: u64,
    pub failures: u64,
    /// The last failure of a poll, a load or a merge, until a later one succeeds.
    pub last_error: Option<String>,
    /// Files that changed since the last listing and landed less than the settle time ago:
    /// taken once a listing finds them unchanged.
    pub settling_files: usize,
    /// Files in the landing prefix whose names the pattern does not match.
    pub unmatched_files: usize,
    /// Files no version the table remembers consumed that last changed before its inputs
    /// window (on a table older than the window): a version may have loaded them and
    /// forgotten it, so they are never loaded (`ravel-load load --reload` loads one).
    pub beyond_window_files: usize,
    /// Entries whose names match but that are not regular files (pipes, sockets, devices,
    /// links to directories): never loaded.
    pub skipped_files: Vec<crate::landing::Skipped>,
    /// Files that could not be loaded: left out of every batch until they change.
    pub failed_files: Vec<FailedFile>,
    /// Files replaced under a name the table already consumed: never loaded again.
    pub replaced_files: Vec<ReplacedFile>,
    /// What the service will do next on the table, and why.
    pub next: Decision,
}

/// A landed file that failed its load.
#[derive(Debug, Clone, Serialize)]
pub struct FailedFile {
    pub name: String,
    pub size: u64,
    pub error: String,
}

/// A landed file whose name a version consumed with other content.
#[derive(Debug, Clone, Serialize)]
pub struct ReplacedFile {
    pub name: String,
    pub size: u64,
    /// The version that consumed the earlier file of that name.
    pub consumed_by: u64,
}

/// The next action and its reason.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Decision {
    /// `load`, `merge`, `wait` or `nothing`.
    pub action: &'static str,
    pub reason: String,
}

impl Decision {
    pub fn new(action: &'static str, reason: impl Into<String>) -> Decision {
        Decision {
            action,
            reason: reason.into(),
        }
    }
}
