//! The JSON result of `serve` (`serve.json`): its parameters, the figures, and the series
//! behind them (the status polled, the files, the service processes).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::result::{Build, Machine};

pub const FORMAT: &str = "ravel-bench-serve/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeResult {
    pub format: String,
    /// UTC start time, RFC 3339.
    pub started: String,
    pub build: Build,
    pub machine: Machine,
    pub params: Params,
    /// The base's `load --compact` (the figures of `ravel-bench run`'s load steps).
    pub base: BTreeMap<String, f64>,
    /// Every file, in arrival order.
    pub files: Vec<FileRecord>,
    /// The table's status, every poll that answered.
    pub samples: Vec<Sample>,
    /// Every service process of the arrival, in order.
    pub processes: Vec<ProcessRecord>,
    pub figures: Option<Figures>,
    pub exactness: Option<Exactness>,
    pub idle: Option<Idle>,
    /// Why the run stopped early, or what it found wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    pub initial_rows: u64,
    pub files: u32,
    pub file_rows: u64,
    pub interval_s: f64,
    pub kills: u32,
    pub seed: u64,
    pub poll_interval: String,
    pub batch_age: String,
    /// Seconds between two looks at the status.
    pub sample_s: f64,
    /// `ravel-load tier --json`: the machine's tier, its load budget among it.
    pub tier: serde_json::Value,
}

/// One arriving file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileRecord {
    pub index: u32,
    pub bytes: u64,
    /// Its landing (modification time after the rename), seconds since the arrival began.
    pub landed_s: f64,
    /// The first poll that saw its rows, seconds since the arrival began.
    pub visible_s: Option<f64>,
    pub latency_s: Option<f64>,
}

/// The table's status at one poll.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the arrival began.
    pub t_s: f64,
    /// Which service process answered (0-based, in `processes`).
    pub process: usize,
    pub rows: u64,
    pub objects: u64,
    pub depth: u64,
    pub depth_bound: Option<u64>,
    pub pending_files: u64,
    pub loads: u64,
    pub merges: u64,
    pub failures: u64,
    /// The service's next action (`load`, `merge`, `wait`, `nothing`).
    #[serde(default)]
    pub next_action: String,
}

/// One service process of the arrival and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub started_s: f64,
    pub stopped_s: f64,
    /// `kill` (SIGKILL) or `term` (SIGTERM at the end).
    pub end: String,
    /// Seconds from its start to its listening address.
    pub start_s: f64,
    pub peak_rss_mb: f64,
    pub cpu_s: f64,
    /// Its `/metrics` counters, read just before it ended.
    pub merge_written_bytes: u64,
    pub files_loaded: u64,
    pub latency_count: u64,
    pub latency_sum_s: f64,
}

/// The run's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Figures {
    /// Bytes of the files that arrived (the base not counted).
    pub arrived_bytes: u64,
    /// Merge bytes the service processes wrote, summed over them.
    pub merge_written_bytes: u64,
    /// `merge_written_bytes` over `arrived_bytes`.
    pub write_amplification: f64,
    pub files_loaded: u64,
    pub latency_p50_s: Option<f64>,
    pub latency_p99_s: Option<f64>,
    pub latency_max_s: Option<f64>,
    /// The service's own histogram: its sum over its count, over the processes.
    pub service_latency_mean_s: Option<f64>,
    pub max_depth: u64,
    /// Polls right after a merge (the merge count grew since the poll before) and those
    /// among them with the depth over its bound.
    pub polls_after_merge: usize,
    pub polls_after_merge_over_bound: usize,
    /// Polls with the depth over its bound, whatever came before.
    pub polls_over_bound: usize,
    pub peak_rss_mb: f64,
    pub cpu_s: f64,
    /// From the last arrival until no file was pending, the depth was within its bound and
    /// the service had nothing left to do (no merge planned).
    pub settle_s: f64,
}

/// The table after the service stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exactness {
    pub expected_rows: u64,
    pub rows: u64,
    pub distinct_watch_ids: u64,
    /// Expected rows missing (expected − distinct), and rows present more than once
    /// (rows − distinct).
    pub lost: i64,
    pub duplicated: i64,
}

impl Exactness {
    pub fn exact(&self) -> bool {
        self.rows == self.expected_rows && self.distinct_watch_ids == self.expected_rows
    }
}

/// A service with nothing to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Idle {
    pub seconds: f64,
    pub cpu_s: f64,
    /// `cpu_s` over `seconds`: the share of one core.
    pub core_share: f64,
    pub peak_rss_mb: f64,
    /// The landing directory's listings, traced after the idle minute; `None` where strace
    /// could not attach.
    pub listings: Option<Listings>,
}

/// Listings of the landing directory (its `openat` as a directory, traced by strace) over a
/// window of the idle service.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listings {
    pub window_s: f64,
    pub listings: u64,
    /// `listings` over the polls the window holds (its seconds over the poll interval).
    pub per_poll: Option<f64>,
}

impl ServeResult {
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }
}
