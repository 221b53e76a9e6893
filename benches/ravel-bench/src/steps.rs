//! The fixed steps, each a `ravel-load` (or peer) process measured by [`crate::exec`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::exec::{self, Measured};
use crate::result::{Run, StatementFigures, Step};

/// The steps after `gen`, in their fixed order.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StepName {
    /// Load the generated rows in arrival order into a table with the hits layout.
    Load,
    /// Load the same rows already in clustering-key order.
    LoadPresorted,
    /// Load the generated rows into a table with no clustering key.
    LoadUnclustered,
    /// `load --compact`: the generated rows published globally sorted in one command (runs
    /// spilled and merged once), into a table of its own.
    LoadCompact,
    /// `compact` the table of `load` (its runs into one sequence); `verify` and the queries
    /// then read the compacted table.
    Compact,
    /// `verify --deep` the table of `load`.
    Verify,
    /// The statements against `load`'s table, each with a new store handle and context.
    QueriesCold,
    /// Each statement again in the context of its cold run.
    QueriesHot,
}

impl StepName {
    /// The steps a run without `--steps` takes: all but `compact`, so that `verify` and the
    /// queries read the table as the load left it unless compaction is asked for.
    pub const DEFAULT: [StepName; 6] = [
        StepName::Load,
        StepName::LoadPresorted,
        StepName::LoadUnclustered,
        StepName::Verify,
        StepName::QueriesCold,
        StepName::QueriesHot,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StepName::Load => "load",
            StepName::LoadPresorted => "load-presorted",
            StepName::LoadUnclustered => "load-unclustered",
            StepName::LoadCompact => "load-compact",
            StepName::Compact => "compact",
            StepName::Verify => "verify",
            StepName::QueriesCold => "queries-cold",
            StepName::QueriesHot => "queries-hot",
        }
    }
}

/// What the steps run on; one `run` or `ab` command measures every build on the same workload.
pub struct Workload {
    pub dir: PathBuf,
    /// Generated rows, arrival order.
    pub input: PathBuf,
    /// The same rows in clustering-key order.
    pub presorted: PathBuf,
    pub rows: u64,
    pub steps: Vec<StepName>,
    pub queries: PathBuf,
    pub load_args: Vec<String>,
    pub peers: Peers,
    /// Remove the tables once the steps are measured, before the peers run (their disk then
    /// goes to the peers' spill and output).
    pub drop_tables: bool,
}

/// The peers run on the same input after the steps, and how.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Peers {
    /// Peers to run on the same input after the steps, comma-separated (duckdb, polars, chdb,
    /// pyarrow, datafusion).
    #[arg(long = "peers", value_name = "PEERS", value_delimiter = ',')]
    pub names: Vec<String>,
    /// The peers script.
    #[arg(long = "peers-py", value_name = "PEERS_PY", default_value = crate::DEFAULT_PEERS_PY)]
    pub script: PathBuf,
    /// The Python that runs it.
    #[arg(long, default_value = "python3")]
    pub python: String,
}

pub const TABLE: &str = "hits";
const MB: f64 = 1e6;

fn file_bytes(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

fn figures(m: &Measured) -> BTreeMap<String, f64> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let mut f = BTreeMap::from([
        ("wall_s".into(), m.wall_s),
        ("peak_rss_mb".into(), m.peak_rss_bytes as f64 / MB),
        ("cpu_user_s".into(), m.user_s),
        ("cpu_sys_s".into(), m.sys_s),
        // The share of the machine's cores the process kept busy over its wall time.
        ("cpu_busy".into(), (m.user_s + m.sys_s) / (m.wall_s * cores)),
    ]);
    if let Some(steal) = m.steal_share {
        f.insert("machine_steal".into(), steal);
    }
    f
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    let mut v = v;
    for p in path {
        v = v.get(p)?;
    }
    v.as_f64()
}

/// `ravel-load gen`: the step every run starts from.
pub fn generate(bin: &Path, rows: u64, seed: u64, out: &Path) -> Result<Step> {
    let m = exec::run(Command::new(bin).args([
        "gen",
        "--rows",
        &rows.to_string(),
        "--seed",
        &seed.to_string(),
        "--out",
        &out.to_string_lossy(),
    ]))?;
    let mut f = figures(&m);
    let bytes = file_bytes(out);
    f.insert("rows".into(), rows as f64);
    f.insert("rows_per_s".into(), rows as f64 / m.wall_s);
    f.insert("mb_out_per_s".into(), bytes as f64 / MB / m.wall_s);
    f.insert("stored_bytes".into(), bytes as f64);
    Ok(Step {
        name: "gen".into(),
        figures: f,
        ..Step::default()
    })
}

fn layout(bin: &Path, store: &Path, args: &[&str]) -> Result<()> {
    let mut cmd = Command::new(bin);
    cmd.args([
        "layout",
        "--store",
        &store.to_string_lossy(),
        "--table",
        TABLE,
    ])
    .args(args);
    exec::run(&mut cmd).map(|_| ())
}

/// A fresh table in `store` loaded from `input`; `clustered` sets the hits clustering key.
pub fn load(
    name: &str,
    bin: &Path,
    store: &Path,
    input: &Path,
    clustered: bool,
    load_args: &[String],
) -> Result<Step> {
    let _ = std::fs::remove_dir_all(store);
    if clustered {
        layout(
            bin,
            store,
            &[
                "clustering-key",
                "set",
                "--column",
                "EventDate",
                "--column",
                "UserID",
                "--bucket-width",
                "1d",
            ],
        )?;
    } else {
        layout(bin, store, &["clustering-key", "clear"])?;
    }
    layout(bin, store, &["bloom-scope", "set", "--scope", "text"])?;
    let mut cmd = Command::new(bin);
    cmd.args([
        "load",
        "--store",
        &store.to_string_lossy(),
        "--table",
        TABLE,
    ])
    .arg("--input")
    .arg(input)
    .arg("--json")
    .args(load_args);
    let m = exec::run(&mut cmd)?;
    let report: Value = serde_json::from_str(&m.stdout)
        .with_context(|| format!("{name}: the load's --json report"))?;
    let mut f = figures(&m);
    // `load --compact` reports its spill and merge too.
    if report.get("spill_bytes").is_some() {
        sorted_figures(&report, &mut f);
    }
    let rows = num(&report, &["rows"]).context("report has rows")?;
    let stored = f
        .get("stored_bytes")
        .copied()
        .unwrap_or(num(&report, &["stored_bytes"]).context("report has stored_bytes")?);
    f.insert("rows".into(), rows);
    f.insert("rows_per_s".into(), rows / m.wall_s);
    f.insert(
        "mb_in_per_s".into(),
        file_bytes(input) as f64 / MB / m.wall_s,
    );
    f.insert("mb_out_per_s".into(), stored / MB / m.wall_s);
    f.insert("stored_bytes".into(), stored);
    // A load lists its objects; `load --compact` counts them.
    let objects = match &report["objects"] {
        Value::Array(a) => a.len() as f64,
        other => other.as_f64().unwrap_or(0.0),
    };
    f.insert("objects".into(), objects);
    for (k, v) in [
        ("runs", num(&report, &["runs"])),
        (
            "peak_budget_mb",
            num(&report, &["peak_budget_bytes"]).map(|b| b / MB),
        ),
        ("report_wall_s", num(&report, &["wall_s"])),
    ] {
        if let Some(v) = v {
            f.insert(k.into(), v);
        }
    }
    if let Some(stages) = report["stages"].as_object() {
        for (k, v) in stages {
            if let Some(v) = v.as_f64() {
                f.insert(format!("stage_{k}"), v);
            }
        }
    }
    Ok(Step {
        name: name.into(),
        figures: f,
        ..Step::default()
    })
}

/// The figures of a `load --compact` report beyond a load's: spill, passes, bytes written
/// and write amplification (every byte stored over the bytes published).
fn sorted_figures(report: &Value, f: &mut BTreeMap<String, f64>) {
    for (k, path) in [
        ("spill_bytes", "spill_bytes"),
        ("spill_objects", "spill_objects"),
        ("passes", "passes"),
        ("written_bytes", "written_bytes"),
        ("write_amplification", "write_amplification"),
        ("merge_s", "merge_s"),
    ] {
        if let Some(v) = num(report, &[path]) {
            f.insert(k.into(), v);
        }
    }
}

/// The flags of `load_args` that `compact` takes too (the budget and the objects' geometry),
/// with their values.
pub fn compact_args(load_args: &[String]) -> Vec<String> {
    const SHARED: [&str; 4] = [
        "--load-budget",
        "--object-bytes",
        "--pipeline-depth",
        "--zstd-level",
    ];
    let mut out = Vec::new();
    let mut args = load_args.iter();
    while let Some(a) = args.next() {
        let flag = a.split('=').next().unwrap_or(a);
        if SHARED.contains(&flag) {
            out.push(a.clone());
            if !a.contains('=')
                && let Some(v) = args.next()
            {
                out.push(v.clone());
            }
        }
    }
    out
}

/// `compact` of the table in `store`, with the report's figures.
fn compact(bin: &Path, store: &Path, load_args: &[String]) -> Result<Step> {
    let mut cmd = Command::new(bin);
    cmd.args([
        "compact",
        "--store",
        &store.to_string_lossy(),
        "--table",
        TABLE,
        "--json",
    ])
    .args(compact_args(load_args));
    let m = exec::run(&mut cmd)?;
    let report: Value = serde_json::from_str(&m.stdout).context("compact's --json report")?;
    let mut f = figures(&m);
    let rows = num(&report, &["output_rows"]).unwrap_or(0.0);
    f.insert("rows".into(), rows);
    f.insert("rows_per_s".into(), rows / m.wall_s);
    for (k, path) in [
        ("objects", "output_objects"),
        ("stored_bytes", "output_bytes"),
        ("input_objects", "input_objects"),
        ("input_bytes", "input_bytes"),
        ("chains", "chains"),
        ("passes", "passes"),
        ("steps", "steps"),
        ("written_bytes", "written_bytes"),
        ("write_amplification", "write_amplification"),
        ("depth_before", "depth_before"),
        ("depth_after", "depth_after"),
    ] {
        if let Some(v) = num(&report, &[path]) {
            f.insert(k.into(), v);
        }
    }
    if let Some(b) = num(&report, &["peak_budget_bytes"]) {
        f.insert("peak_budget_mb".into(), b / MB);
    }
    for (k, path) in [
        ("stage_plan_s", &["stages", "plan_s"][..]),
        ("stage_merge_s", &["stages", "merge_s"]),
        ("stage_encode_s", &["stages", "write", "encode_s"]),
        ("stage_upload_s", &["stages", "write", "upload_s"]),
    ] {
        if let Some(v) = num(&report, path) {
            f.insert(k.into(), v);
        }
    }
    Ok(Step {
        name: "compact".into(),
        figures: f,
        ..Step::default()
    })
}

fn verify(bin: &Path, store: &Path) -> Result<Step> {
    let m = exec::run(Command::new(bin).args([
        "verify",
        "--store",
        &store.to_string_lossy(),
        "--table",
        TABLE,
        "--deep",
        "--json",
    ]))?;
    let report: Value = serde_json::from_str(&m.stdout).context("verify's --json report")?;
    let mut f = figures(&m);
    let rows = num(&report, &["rows"]).unwrap_or(0.0);
    let bytes = num(&report, &["bytes"]).unwrap_or(0.0);
    f.insert("rows".into(), rows);
    f.insert("rows_per_s".into(), rows / m.wall_s);
    f.insert("mb_in_per_s".into(), bytes / MB / m.wall_s);
    f.insert("objects".into(), num(&report, &["objects"]).unwrap_or(0.0));
    f.insert("stored_bytes".into(), bytes);
    Ok(Step {
        name: "verify".into(),
        figures: f,
        ..Step::default()
    })
}

/// `ravel-load bench-queries --json` of `queries` against the table in `store`: the process
/// measured and its array of statement runs (each cold, then hot).
pub fn bench_queries(bin: &Path, store: &Path, queries: &Path) -> Result<(Measured, Vec<Value>)> {
    let m = exec::run(
        Command::new(bin)
            .args([
                "bench-queries",
                "--store",
                &store.to_string_lossy(),
                "--table",
                TABLE,
                "--json",
            ])
            .arg("--queries")
            .arg(queries),
    )?;
    let runs: Vec<Value> = serde_json::from_str(&m.stdout).context("bench-queries --json")?;
    Ok((m, runs))
}

/// Which of a statement run's figures a query step reads: the cold or the hot run's.
#[derive(Clone, Copy)]
pub enum Temperature {
    Cold,
    Hot,
}

/// The figures of each statement run of `bench-queries --json`, cold or hot.
pub fn statement_figures(runs: &[Value], t: Temperature) -> Vec<StatementFigures> {
    let (time, gets, bytes) = match t {
        Temperature::Cold => ("cold_s", "cold_gets", "cold_bytes"),
        Temperature::Hot => ("hot_s", "hot_gets", "hot_bytes"),
    };
    runs.iter()
        .map(|r| StatementFigures {
            number: r["number"].as_u64().unwrap_or(0) as usize,
            rows: r["rows"].as_u64().map(|v| v as usize),
            wall_s: r[time].as_f64(),
            gets: r[gets].as_u64(),
            bytes_fetched: r[bytes].as_u64(),
            objects_touched: r["objects_touched"].as_u64().map(|v| v as usize),
            objects_total: r["objects_total"].as_u64().map(|v| v as usize),
            error: r["error"].as_str().map(str::to_string),
        })
        .collect()
}

/// `bench-queries` once: its cold runs make `queries-cold`, its hot runs `queries-hot`. Both
/// steps share the process, so both carry its wall (`process_wall_s`) and peak RSS; their
/// `wall_s` is the sum of their statements' times.
fn queries(bin: &Path, store: &Path, queries: &Path, want: &[StepName]) -> Result<Vec<Step>> {
    let (m, runs) = bench_queries(bin, store, queries)?;
    let mut out = Vec::new();
    for (step, t) in [
        (StepName::QueriesCold, Temperature::Cold),
        (StepName::QueriesHot, Temperature::Hot),
    ] {
        if !want.contains(&step) {
            continue;
        }
        let statements = statement_figures(&runs, t);
        let sum = |g: fn(&StatementFigures) -> Option<f64>| statements.iter().filter_map(g).sum();
        let wall: f64 = sum(|s| s.wall_s);
        let fetched: f64 = sum(|s| s.bytes_fetched.map(|v| v as f64));
        let mut f = figures(&m);
        f.insert("wall_s".into(), wall);
        f.insert("process_wall_s".into(), m.wall_s);
        f.insert("gets".into(), sum(|s| s.gets.map(|v| v as f64)));
        f.insert("bytes_fetched".into(), fetched);
        f.insert("mb_in_per_s".into(), fetched / MB / wall.max(1e-9));
        f.insert("statements".into(), statements.len() as f64);
        f.insert(
            "failed".into(),
            statements.iter().filter(|s| s.error.is_some()).count() as f64,
        );
        // Sums cover the statements that ran: a failure must not pass for a faster step.
        let failures: Vec<String> = statements
            .iter()
            .filter_map(|s| s.error.as_ref().map(|e| format!("Q{}: {e}", s.number)))
            .collect();
        let error = (!failures.is_empty()).then(|| {
            format!(
                "{} statement(s) failed: {}",
                failures.len(),
                failures.join("; ")
            )
        });
        out.push(Step {
            name: step.name().into(),
            figures: f,
            statements,
            error,
        });
    }
    Ok(out)
}

/// A peer (`peers.py`) sorting the same input by the same key into row groups of the size of
/// ravel-load's objects; ratios are to the `load` step of the same run.
fn peer(w: &Workload, peer: &str, load: Option<&Step>) -> Step {
    let name = format!("peer-{peer}");
    let out = w.dir.join(format!("out-{peer}"));
    let load_fig = |k: &str| load.and_then(|s| s.figures.get(k).copied());
    // ravel-load's rows per object, the peers' rows per row group: the same geometry.
    let rows_per_group = match (load_fig("rows"), load_fig("objects")) {
        (Some(r), Some(o)) if o > 0.0 => (r / o).ceil() as u64,
        _ => 240_000,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let result = exec::run(
        Command::new(&w.peers.python)
            .arg(&w.peers.script)
            .arg(peer)
            .arg(&w.input)
            .arg(&out)
            .env("ROWS_PER_GROUP", rows_per_group.to_string())
            .env("THREADS", cores.to_string()),
    );
    let _ = std::fs::remove_dir_all(&out);
    let m = match result {
        Ok(m) => m,
        Err(e) => {
            return Step {
                name,
                error: Some(format!("{e:#}")),
                ..Step::default()
            };
        }
    };
    let line: Value = match m
        .stdout
        .lines()
        .last()
        .map(serde_json::from_str)
        .transpose()
    {
        Ok(Some(v)) => v,
        _ => {
            return Step {
                name,
                error: Some(format!("no JSON line from peers.py: {:?}", m.stdout)),
                ..Step::default()
            };
        }
    };
    let bytes = num(&line, &["out_bytes"]).unwrap_or(0.0);
    let mut f = figures(&m);
    f.insert("rows".into(), w.rows as f64);
    f.insert("rows_per_s".into(), w.rows as f64 / m.wall_s);
    f.insert(
        "mb_in_per_s".into(),
        file_bytes(&w.input) as f64 / MB / m.wall_s,
    );
    f.insert("mb_out_per_s".into(), bytes / MB / m.wall_s);
    f.insert("stored_bytes".into(), bytes);
    f.insert("rows_per_group".into(), rows_per_group as f64);
    if let Some(v) = num(&line, &["wall_s"]) {
        f.insert("inner_wall_s".into(), v);
    }
    for (ratio, k) in [
        ("wall_vs_ravel", "wall_s"),
        ("bytes_vs_ravel", "stored_bytes"),
        ("rss_vs_ravel", "peak_rss_mb"),
    ] {
        if let (Some(mine), Some(theirs)) = (f.get(k).copied(), load_fig(k)) {
            f.insert(ratio.into(), mine / theirs);
        }
    }
    Step {
        name,
        figures: f,
        ..Step::default()
    }
}

/// One pass over the steps `w.steps` with `bin`, then the peers. A step that fails is
/// recorded with its error and the pass goes on (later steps that need its table fail too,
/// each saying so).
pub fn run(w: &Workload, bin: &Path, progress: &mut dyn FnMut(&Step)) -> Run {
    let mut run = Run::default();
    let store = |s: &str| w.dir.join(format!("store-{s}"));
    let mut push = |run: &mut Run, s: Step| {
        progress(&s);
        run.steps.push(s);
    };
    let failed = |name: &str, e: anyhow::Error| Step {
        name: name.into(),
        error: Some(format!("{e:#}")),
        ..Step::default()
    };
    let mut queried = false;
    for &step in &w.steps {
        let name = step.name();
        let result = match step {
            StepName::Load => load(name, bin, &store("load"), &w.input, true, &w.load_args),
            StepName::LoadPresorted => load(
                name,
                bin,
                &store("presorted"),
                &w.presorted,
                true,
                &w.load_args,
            ),
            StepName::LoadUnclustered => load(
                name,
                bin,
                &store("unclustered"),
                &w.input,
                false,
                &w.load_args,
            ),
            StepName::LoadCompact => {
                let mut args = w.load_args.clone();
                args.push("--compact".into());
                load(name, bin, &store("load-compact"), &w.input, true, &args)
            }
            StepName::Compact => compact(bin, &store("load"), &w.load_args),
            StepName::Verify => verify(bin, &store("load")),
            // One process serves both query steps.
            StepName::QueriesCold | StepName::QueriesHot if queried => continue,
            StepName::QueriesCold | StepName::QueriesHot => {
                queried = true;
                let wanted = [StepName::QueriesCold, StepName::QueriesHot]
                    .into_iter()
                    .filter(|s| w.steps.contains(s));
                match queries(bin, &store("load"), &w.queries, &w.steps) {
                    Ok(steps) => steps.into_iter().for_each(|s| push(&mut run, s)),
                    Err(e) => {
                        let e = format!("{e:#}");
                        for s in wanted {
                            push(&mut run, failed(s.name(), anyhow::anyhow!("{e}")));
                        }
                    }
                }
                continue;
            }
        };
        push(&mut run, result.unwrap_or_else(|e| failed(name, e)));
    }
    if w.drop_tables {
        for s in ["load", "presorted", "unclustered", "load-compact"] {
            let _ = std::fs::remove_dir_all(store(s));
        }
    }
    let load_step = run
        .steps
        .iter()
        .find(|s| s.name == "load" && s.error.is_none())
        .cloned();
    for p in &w.peers.names {
        push(&mut run, peer(w, p, load_step.as_ref()));
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_takes_the_budget_and_geometry_of_the_load_flags() {
        let load: Vec<String> = [
            "--load-budget",
            "2000000000",
            "--target-bytes",
            "9",
            "--object-bytes=5",
            "--zstd-level",
            "1",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            compact_args(&load),
            [
                "--load-budget",
                "2000000000",
                "--object-bytes=5",
                "--zstd-level",
                "1"
            ]
        );
    }
}
