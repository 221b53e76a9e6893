//! The JSON result of `life` (`life.json`): its parameters and, every `--every` versions, the
//! figures of the table and of the service.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use ravel_testkit::RequestCounts;
use serde::{Deserialize, Serialize};

use crate::result::{Build, Machine};

pub const FORMAT: &str = "ravel-bench-life/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LifeResult {
    pub format: String,
    /// UTC start time, RFC 3339.
    pub started: String,
    pub build: Build,
    pub machine: Machine,
    pub params: Params,
    /// `deltalake` and `polars` versions, or why the Python readers were not measured.
    pub python: String,
    /// One element every `every` versions.
    pub checkpoints: Vec<Checkpoint>,
    /// Per figure, its largest value over its smallest among the checkpoints past the first
    /// retention window (the target: at most 1.25).
    pub flatness: BTreeMap<String, f64>,
    /// Why the run stopped early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    pub versions: u64,
    pub every: u64,
    pub file_rows: usize,
    /// Files landed per second while landing.
    pub rate: f64,
    pub poll_interval: String,
    pub batch_age: String,
    pub settle: String,
    pub cursor_lookback: String,
    pub gc_interval: String,
    pub files_window: String,
    pub inputs_window: String,
    pub log_window: String,
    pub idle_s: f64,
    /// Versions of each segment that came from landing files; the others were committed
    /// straight into the store (0: every version landed).
    #[serde(default)]
    pub landed_per_segment: u64,
}

/// The figures at one checkpoint of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The table's version once the service settled.
    pub version: u64,
    /// Seconds since the first file landed.
    pub at_s: f64,
    pub files_landed: u64,
    pub segment: Segment,
    pub log: LogFigures,
    pub idle: IdleFigures,
    pub start: StartFigures,
    pub opens: Opens,
}

/// The landing since the checkpoint before, until the service settled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Segment {
    pub seconds: f64,
    pub versions: u64,
    pub versions_per_s: f64,
    pub files: u64,
    /// Listings of the landing prefix, the keys they returned, and the most one returned.
    pub landing_lists: u64,
    pub landing_keys_mean: f64,
    pub landing_keys_max: u64,
    pub requests: Requests,
}

/// What the store holds for the table's log.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LogFigures {
    /// Objects under `_delta_log/` and their bytes.
    pub files: u64,
    pub bytes: u64,
    /// The newest checkpoint: its version and bytes (all its parts).
    pub checkpoint_version: Option<u64>,
    pub checkpoint_bytes: u64,
    /// Objects of the whole table (its data, log and own files) and their bytes.
    pub table_files: u64,
    pub table_bytes: u64,
}

/// The settled service over an idle window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdleFigures {
    pub seconds: f64,
    /// The window over the poll interval.
    pub polls: f64,
    pub cpu_ms_per_poll: f64,
    pub core_share: f64,
    pub rss_mb: f64,
    pub peak_rss_mb: f64,
    pub requests_per_poll: f64,
    pub landing_lists: u64,
    pub landing_keys_max: u64,
    pub landing_bytes_per_list: f64,
    pub requests: Requests,
}

/// A fresh service on the table: until it listens, answers a status, and answers one of a
/// table it polled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartFigures {
    pub listen_s: f64,
    pub first_status_s: f64,
    pub polled_s: f64,
    pub requests: Requests,
}

/// Opening the table to count its rows: `ravel-load query`, delta-rs, polars.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Opens {
    /// The process's wall seconds, and the rows it counted.
    pub query_s: f64,
    pub query_rows: u64,
    pub query_requests: u64,
    /// Seconds inside Python (its imports not counted), and the store requests.
    pub deltars_s: Option<f64>,
    pub deltars_requests: Option<u64>,
    pub polars_s: Option<f64>,
    pub polars_rows: Option<u64>,
    pub polars_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_error: Option<String>,
}

/// Requests the test S3 server answered, by kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Requests {
    pub total: u64,
    pub list: u64,
    pub get: u64,
    pub put: u64,
    pub head: u64,
    pub delete: u64,
    pub post: u64,
}

impl From<&RequestCounts> for Requests {
    fn from(c: &RequestCounts) -> Requests {
        Requests {
            total: c.total(),
            list: c.list,
            get: c.get,
            put: c.put,
            head: c.head,
            delete: c.delete,
            post: c.post,
        }
    }
}

impl LifeResult {
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }
}
