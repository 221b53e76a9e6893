//! The JSON result of a run: the build, the machine, the flags, and per run the steps with
//! their figures.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub const FORMAT: &str = "ravel-bench/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchResult {
    pub format: String,
    /// UTC start time, RFC 3339.
    pub started: String,
    pub build: Build,
    pub machine: Machine,
    pub flags: Flags,
    /// Preparation outside the steps: `presort_s` (writing the presorted input) and
    /// `rss_floor_mb` (the peak RSS an empty child reports, included in every step's).
    #[serde(default)]
    pub prep: BTreeMap<String, f64>,
    /// One element per repetition of the step sequence (`--repeat`); `gen` is in the first.
    pub runs: Vec<Run>,
}

/// The ravel-load binary measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Build {
    pub bin: String,
    /// `ravel-load --version`, e.g. `ravel-load 0.1.0 (7de0292a1b2c)`.
    pub version: String,
    /// The git commit in that version (`-dirty` when built from changed files).
    pub commit: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub cores: usize,
    pub mem_total_kb: u64,
    pub cpu_model: String,
    pub kernel: String,
    pub hostname: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Flags {
    pub rows: u64,
    pub seed: u64,
    pub steps: Vec<String>,
    pub peers: Vec<String>,
    /// Extra arguments given to every `ravel-load load`.
    pub load_args: Vec<String>,
    pub queries: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Run {
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Step {
    pub name: String,
    /// Named figures: `wall_s`, `rows_per_s`, `mb_in_per_s`, `mb_out_per_s`, `peak_rss_mb`,
    /// `objects`, `stored_bytes`, `gets`, `bytes_fetched`, stage times (`stage_sort_s`…), and
    /// for peers their ratios to ravel-load's `load` (`wall_vs_ravel`…).
    pub figures: BTreeMap<String, f64>,
    /// Per statement (query steps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<StatementFigures>,
    /// Why the step has no figures (a peer that is not installed, a failed command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatementFigures {
    pub number: usize,
    pub rows: Option<usize>,
    pub wall_s: Option<f64>,
    pub gets: Option<u64>,
    pub bytes_fetched: Option<u64>,
    pub objects_touched: Option<usize>,
    pub objects_total: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether a larger value of the figure is better (throughputs); for the others (seconds,
/// bytes, memory, requests) smaller is better.
pub fn higher_is_better(figure: &str) -> bool {
    figure.ends_with("_per_s")
}

impl BenchResult {
    pub fn read(path: &Path) -> Result<BenchResult> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let r: BenchResult = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a ravel-bench result", path.display()))?;
        anyhow::ensure!(
            r.format == FORMAT,
            "{}: format {:?}, this ravel-bench reads {FORMAT:?}",
            path.display(),
            r.format
        );
        Ok(r)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Every sample of each (step, figure), over the runs, in step order of first appearance.
    pub fn samples(&self) -> Vec<((String, String), Vec<f64>)> {
        let mut out: Vec<((String, String), Vec<f64>)> = Vec::new();
        for run in &self.runs {
            for step in &run.steps {
                for (fig, v) in &step.figures {
                    let key = (step.name.clone(), fig.clone());
                    match out.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, s)) => s.push(*v),
                        None => out.push((key, vec![*v])),
                    }
                }
            }
        }
        out
    }
}

/// The median of `v` (not empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// One line per step (medians over the runs): the figures every step shares, then the peers'
/// ratios to ravel-load's `load`.
pub fn summary(r: &BenchResult) -> String {
    use std::fmt::Write;
    let cols = [
        ("wall_s", "wall s"),
        ("rows_per_s", "rows/s"),
        ("mb_in_per_s", "MB/s in"),
        ("mb_out_per_s", "MB/s out"),
        ("peak_rss_mb", "RSS MB"),
        ("objects", "objects"),
        ("stored_bytes", "stored bytes"),
        ("gets", "GETs"),
        ("bytes_fetched", "bytes fetched"),
        ("wall_vs_ravel", "wall/x"),
        ("bytes_vs_ravel", "bytes/x"),
        ("rss_vs_ravel", "RSS/x"),
    ];
    let mut out = format!("{:<17}", "step");
    for (_, h) in cols {
        let _ = write!(out, " {h:>13}");
    }
    out.push('\n');
    let samples = r.samples();
    let mut names: Vec<&str> = Vec::new();
    for run in &r.runs {
        for s in &run.steps {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
    }
    for name in names {
        let _ = write!(out, "{name:<17}");
        let failed = r
            .runs
            .iter()
            .flat_map(|run| &run.steps)
            .find(|s| s.name == name && s.error.is_some());
        for (k, _) in cols {
            let v = samples
                .iter()
                .find(|((s, f), _)| s == name && f == k)
                .map(|(_, v)| median(v));
            let cell = match v {
                None => "-".to_string(),
                Some(v) if k.ends_with("_ravel") => format!("{v:.2}"),
                Some(v) if v >= 1000.0 || v.fract() == 0.0 => format!("{v:.0}"),
                Some(v) => format!("{v:.2}"),
            };
            let _ = write!(out, " {cell:>13}");
        }
        if let Some(e) = failed.and_then(|s| s.error.as_deref()) {
            let _ = write!(out, "  FAILED: {}", e.lines().next().unwrap_or(""));
        }
        out.push('\n');
    }
    out.push_str("(medians over the runs; x = ravel-load's load step of the same run)\n");
    out
}
