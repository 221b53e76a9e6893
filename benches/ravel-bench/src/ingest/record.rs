//! The JSON result of `ingest` (`ingest.json`): its parameters, one record per load and table,
//! the point statements' checks, and the totals.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::exec::Measured;
use crate::result::{Build, Machine, StatementFigures};

pub const FORMAT: &str = "ravel-bench-ingest/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IngestResult {
    pub format: String,
    /// UTC start time, RFC 3339.
    pub started: String,
    pub build: Build,
    pub machine: Machine,
    pub params: Params,
    /// The initial `load --compact` (the figures of `ravel-bench run`'s load steps).
    pub initial: BTreeMap<String, f64>,
    pub loads: Vec<LoadRecord>,
    pub checks: Vec<Check>,
    pub totals: Totals,
    /// Why the run stopped before its last load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    pub initial_rows: u64,
    pub loads: u32,
    pub load_rows: u64,
    pub seed: u64,
    pub compare_every: u32,
    pub load_args: Vec<String>,
    /// The file of extra statements, if any.
    pub extra_queries: Option<String>,
    /// The peak RSS an empty child reports (part of every process's figure), MB.
    pub rss_floor_mb: f64,
    /// The counter of the point statements.
    pub counter: Option<Counter>,
    pub statements: Vec<PointStatement>,
}

/// The mid-sized counter the point statements fix: its rows in the initial table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Counter {
    pub id: i64,
    pub rows: u64,
    /// Its share of the initial rows.
    pub share: f64,
}

/// A statement of the points file: its line (`number` in `bench-queries`) and its name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PointStatement {
    pub number: usize,
    pub label: String,
    pub sql: String,
}

/// Load `load` (1-based): the rows of one new day, into P and (when compared) C.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadRecord {
    pub load: u32,
    /// Days after 2013-07-01 of the rows.
    pub day: u32,
    pub rows: u64,
    /// `ravel-load gen` wall seconds.
    pub gen_s: f64,
    /// The table kept by its maintenance policy (the load's own step).
    pub p: TableLoad,
    /// The table compacted to depth 1 after every load (`load --no-maintain`, `compact`).
    pub c: Option<TableLoad>,
}

/// One table's figures for one load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TableLoad {
    /// Bytes the load published (its report's `stored_bytes`).
    pub loaded_bytes: u64,
    /// The load's own seconds (its report's `wall_s`, maintenance not included).
    pub load_s: f64,
    /// The merge after the load: P's maintenance step, C's `compact`; `None` when it did not
    /// run.
    pub merge: Option<Merge>,
    /// Wall seconds of the table's processes for this load, as the harness measured them.
    pub process_s: f64,
    /// The largest peak RSS of those processes, MB.
    pub peak_rss_mb: f64,
    /// Merge bytes written over bytes loaded, summed over the loads so far.
    pub cumulative_wa: f64,
}

impl TableLoad {
    pub fn merge_s(&self) -> f64 {
        self.merge.as_ref().map_or(0.0, |m| m.wall_s)
    }

    pub fn written_bytes(&self) -> u64 {
        self.merge.as_ref().map_or(0, |m| m.written_bytes)
    }

    pub fn depth_after(&self) -> Option<usize> {
        self.merge.as_ref().map(|m| m.depth_after)
    }
}

/// What a `maintain` or `compact` report says (the load's `maintenance` key, or `compact`'s
/// report).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Merge {
    pub wall_s: f64,
    pub written_bytes: u64,
    pub steps: usize,
    pub depth_after: usize,
    /// `None`: the policy has no bound.
    pub depth_bound: Option<usize>,
    /// The product's own figure: bytes written over bytes loaded since the table was last one
    /// sequence.
    pub write_amplification: f64,
    #[serde(default)]
    pub reason: String,
}

impl Merge {
    /// The merge of a report value; `None` for `null` (the step did not run).
    pub fn of(report: &Value) -> Result<Option<Merge>> {
        if report.is_null() {
            return Ok(None);
        }
        serde_json::from_value(report.clone())
            .map(Some)
            .context("a maintenance or compact report without the expected figures")
    }
}

/// A `ravel-load` process and its `--json` report.
pub struct Report {
    pub measured: Measured,
    pub json: Value,
}

impl Report {
    pub fn u64(&self, key: &str) -> u64 {
        self.json[key].as_u64().unwrap_or(0)
    }

    pub fn f64(&self, key: &str) -> f64 {
        self.json[key].as_f64().unwrap_or(0.0)
    }

    pub fn rss_mb(&self) -> f64 {
        self.measured.peak_rss_bytes as f64 / 1e6
    }
}

/// Running sums of a table over the loads, for the cumulative write amplification.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sums {
    pub loaded: u64,
    pub written: u64,
}

impl Sums {
    /// Adds a load and its merge; returns the cumulative write amplification.
    pub fn add(&mut self, loaded: u64, written: u64) -> f64 {
        self.loaded += loaded;
        self.written += written;
        self.written as f64 / self.loaded.max(1) as f64
    }
}

/// The point statements run cold on both tables after load `load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    pub load: u32,
    pub statements: Vec<StatementPair>,
    /// Sums over the statements.
    pub p: Traffic,
    pub c: Option<Traffic>,
    /// P over C of the sums.
    pub ratio: Option<Ratio>,
    /// Why a table's statements did not run (the other's figures stand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One statement's cold run on P and C.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatementPair {
    pub number: usize,
    pub label: String,
    pub p: Option<StatementFigures>,
    pub c: Option<StatementFigures>,
    pub ratio: Option<Ratio>,
}

/// Cold store traffic of statements.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Traffic {
    pub gets: u64,
    pub bytes: u64,
    pub objects_touched: u64,
    pub cold_s: f64,
}

impl Traffic {
    pub fn of(s: &StatementFigures) -> Traffic {
        Traffic {
            gets: s.gets.unwrap_or(0),
            bytes: s.bytes_fetched.unwrap_or(0),
            objects_touched: s.objects_touched.unwrap_or(0) as u64,
            cold_s: s.wall_s.unwrap_or(0.0),
        }
    }

    pub fn sum<'a>(all: impl Iterator<Item = &'a StatementFigures>) -> Traffic {
        all.map(Traffic::of)
            .fold(Traffic::default(), |a, b| Traffic {
                gets: a.gets + b.gets,
                bytes: a.bytes + b.bytes,
                objects_touched: a.objects_touched + b.objects_touched,
                cold_s: a.cold_s + b.cold_s,
            })
    }
}

/// P's traffic over C's.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Ratio {
    pub gets: f64,
    pub bytes: f64,
    pub objects_touched: f64,
}

impl Ratio {
    pub fn of(p: &Traffic, c: &Traffic) -> Ratio {
        let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        Ratio {
            gets: r(p.gets, c.gets),
            bytes: r(p.bytes, c.bytes),
            objects_touched: r(p.objects_touched, c.objects_touched),
        }
    }
}

/// Both tables' totals over the loads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Totals {
    pub p: Option<TableTotals>,
    pub c: Option<TableTotals>,
}

/// A table's totals over the loads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TableTotals {
    pub loads: usize,
    pub loaded_bytes: u64,
    /// The loads' own seconds, summed.
    pub load_s: f64,
    /// The merges' seconds (maintenance or compact), summed.
    pub merge_s: f64,
    /// `merge_s` over `load_s`.
    pub merge_over_load: f64,
    pub written_bytes: u64,
    /// The final cumulative write amplification: `written_bytes` over `loaded_bytes`.
    pub write_amplification: f64,
    /// The deepest overlap after any load.
    pub max_depth: usize,
    pub peak_rss_mb: f64,
    /// Wall seconds of all the table's processes.
    pub process_s: f64,
}

impl TableTotals {
    pub fn of<'a>(loads: impl Iterator<Item = &'a TableLoad>) -> Option<TableTotals> {
        let loads: Vec<&TableLoad> = loads.collect();
        let sum = |f: fn(&TableLoad) -> f64| loads.iter().map(|t| f(t)).sum::<f64>();
        let loaded_bytes = loads.iter().map(|t| t.loaded_bytes).sum::<u64>();
        let written_bytes = loads.iter().map(|t| t.written_bytes()).sum::<u64>();
        let (load_s, merge_s) = (sum(|t| t.load_s), sum(TableLoad::merge_s));
        (!loads.is_empty()).then(|| TableTotals {
            loads: loads.len(),
            loaded_bytes,
            load_s,
            merge_s,
            merge_over_load: merge_s / load_s.max(1e-9),
            written_bytes,
            write_amplification: written_bytes as f64 / loaded_bytes.max(1) as f64,
            max_depth: loads
                .iter()
                .filter_map(|t| t.depth_after())
                .max()
                .unwrap_or(0),
            peak_rss_mb: loads.iter().map(|t| t.peak_rss_mb).fold(0.0, f64::max),
            process_s: sum(|t| t.process_s),
        })
    }
}

impl IngestResult {
    /// The totals of the loads recorded so far.
    pub fn total(&mut self) {
        self.totals = Totals {
            p: TableTotals::of(self.loads.iter().map(|l| &l.p)),
            c: TableTotals::of(self.loads.iter().filter_map(|l| l.c.as_ref())),
        };
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_read_from_reports_and_sums_accumulate() {
        let m = Merge::of(&serde_json::json!({
            "wall_s": 1.5, "written_bytes": 300, "steps": 2, "depth_after": 3,
            "depth_bound": 8, "write_amplification": 1.2, "reason": "tier", "other": 1
        }))
        .unwrap()
        .unwrap();
        assert_eq!(
            (m.written_bytes, m.depth_after, m.depth_bound),
            (300, 3, Some(8))
        );
        assert!(Merge::of(&Value::Null).unwrap().is_none());
        assert!(Merge::of(&serde_json::json!({"wall_s": 1.0})).is_err());
        let mut s = Sums::default();
        assert_eq!(s.add(100, 0), 0.0);
        assert_eq!(s.add(100, 300), 1.5);
    }
}
