//! `ravel-bench ingest`: a table that grows by many small loads, each followed by the table's
//! maintenance policy (table P), against the same rows kept at depth 1 by `compact` after every
//! load (table C).
//!
//! The initial rows (July 2013) are loaded with `load --compact` into P, whose store is copied
//! to make C's. Load i then generates the rows of one new day (2013-08-01 + i − 1, seed
//! `seed + i`, on the same counters: world seed `seed`) and loads them into P (`load`: the policy runs after it) and into C
//! (`load --no-maintain`, then `compact`). Every `--compare-every` loads and after the last,
//! the point statements run cold on both. Seconds, bytes loaded and written (the cumulative
//! write amplification: merge bytes written over bytes loaded, the initial load not counted),
//! overlap depth and peak RSS are recorded per load and table.

mod chart;
mod points;
mod record;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use clap::Args;

use crate::exec;
use crate::steps::{self, TABLE};
use points::Points;
use record::{FORMAT, IngestResult, LoadRecord, Merge, Params, Report, Sums, TableLoad, Totals};

/// The days of the initial rows: July 2013.
pub(crate) const INITIAL_DAYS: u32 = 31;

#[derive(Args)]
pub struct IngestArgs {
    /// Rows of the table before the loads (July 2013), published with `load --compact`.
    #[arg(long, default_value_t = 10_000_000)]
    initial_rows: u64,
    /// Loads after the initial rows, each the rows of one new day from 2013-08-01.
    #[arg(long, default_value_t = 50)]
    loads: u32,
    /// Rows of each load.
    #[arg(long, default_value_t = 200_000)]
    load_rows: u64,
    /// Generator seed of the initial rows and of the world (counters) of every load; load i
    /// draws its rows with seed + i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Working directory: the stores and the generated inputs (default: a new directory in the
    /// system's temp dir, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the default working directory.
    #[arg(long)]
    keep: bool,
    /// Directory of the results: `ingest.json` and `ingest.svg`.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// The ravel-load binary (default: the one beside this ravel-bench).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Run the point statements on both tables every K loads and after the last; 0: no
    /// depth-1 table C (P alone; its statements run after the last load).
    #[arg(long, default_value_t = 1)]
    compare_every: u32,
    /// Extra statements (one per line, the table named `hits`) run with the point statements.
    #[arg(long)]
    queries: Option<PathBuf>,
    /// An extra argument for every `ravel-load load` (repeat), e.g. `--load-arg=--zstd-level=1`;
    /// the budget and geometry flags go to `compact` too.
    #[arg(long = "load-arg", allow_hyphen_values = true)]
    load_args: Vec<String>,
}

/// Where the two tables live.
struct Tables {
    p: PathBuf,
    /// `None` without comparison (`--compare-every 0`).
    c: Option<PathBuf>,
}

pub fn run(args: IngestArgs) -> Result<()> {
    let bin = crate::ravel_load_bin(args.bin.as_deref())?;
    let mut doc = new_result(&args, &bin)?;
    eprintln!("{} · {} cores", doc.build.version, doc.machine.cores);
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let dir = crate::new_work_dir(args.dir.as_deref(), args.keep)?;
    let outcome = drive(&args, &bin, &dir.path, &mut doc);
    doc.error = outcome.as_ref().err().map(|e| format!("{e:#}"));
    doc.total();
    let json = args.out_dir.join("ingest.json");
    doc.write(&json)?;
    print!("{}", chart::table(&doc));
    let svg = args.out_dir.join("ingest.svg");
    if !doc.loads.is_empty() {
        std::fs::write(&svg, chart::svg(&doc)?)
            .with_context(|| format!("writing {}", svg.display()))?;
        eprintln!("wrote {} and {}", json.display(), svg.display());
    }
    outcome
}

fn new_result(args: &IngestArgs, bin: &Path) -> Result<IngestResult> {
    Ok(IngestResult {
        format: FORMAT.into(),
        started: chrono::Utc::now().to_rfc3339(),
        build: crate::build_of(bin)?,
        machine: crate::machine::facts(),
        params: Params {
            initial_rows: args.initial_rows,
            loads: args.loads,
            load_rows: args.load_rows,
            seed: args.seed,
            compare_every: args.compare_every,
            load_args: args.load_args.clone(),
            extra_queries: args.queries.as_ref().map(|p| p.display().to_string()),
            rss_floor_mb: exec::floor()? as f64 / 1e6,
            counter: None,
            statements: Vec::new(),
        },
        initial: Default::default(),
        loads: Vec::new(),
        checks: Vec::new(),
        totals: Totals::default(),
        error: None,
    })
}

/// The initial table, then the loads and checks, recorded into `doc` as they finish.
fn drive(args: &IngestArgs, bin: &Path, dir: &Path, doc: &mut IngestResult) -> Result<()> {
    let tables = Tables {
        p: dir.join("store-P"),
        c: (args.compare_every > 0).then(|| dir.join("store-C")),
    };
    doc.initial = initial(args, bin, dir, &tables)?;
    let clickbench = Path::new(crate::DEFAULT_QUERIES);
    let extra = args.queries.as_deref();
    let points = points::prepare(bin, &tables.p, args.initial_rows, dir, clickbench, extra)?;
    eprintln!(
        "counter {}: {} rows ({:.2} % of the initial rows); {} point statements",
        points.counter.id,
        points.counter.rows,
        points.counter.share * 100.0,
        points.statements.len()
    );
    doc.params.counter = Some(points.counter.clone());
    doc.params.statements = points.statements.clone();
    let (mut p_sums, mut c_sums) = (Sums::default(), Sums::default());
    for i in 1..=args.loads {
        let rec = one_load(args, bin, dir, &tables, i, (&mut p_sums, &mut c_sums))?;
        eprintln!("{}", chart::load_line(&rec));
        doc.loads.push(rec);
        if checks_after(args, i) {
            let c = check(bin, &tables, &points, i);
            eprintln!("{}", chart::check_line(&c));
            doc.checks.push(c);
        }
    }
    Ok(())
}

/// Whether the point statements run after load `i`.
fn checks_after(args: &IngestArgs, i: u32) -> bool {
    i == args.loads || (args.compare_every > 0 && i.is_multiple_of(args.compare_every))
}

fn check(bin: &Path, tables: &Tables, points: &Points, i: u32) -> record::Check {
    points::check(bin, &tables.p, tables.c.as_deref(), points, i)
}

/// Generates the initial rows, loads them into P with `load --compact` (depth 1) and copies
/// P's store to C's; the figures of the load.
fn initial(
    args: &IngestArgs,
    bin: &Path,
    dir: &Path,
    tables: &Tables,
) -> Result<std::collections::BTreeMap<String, f64>> {
    let input = dir.join("initial.parquet");
    let draw = Draw {
        seed: args.seed,
        world_seed: args.seed,
        first_day: 0,
        days: INITIAL_DAYS,
    };
    let gen_s = generate(bin, args.initial_rows, draw, &input)?;
    let mut load_args = args.load_args.clone();
    load_args.push("--compact".into());
    let step = steps::load("initial", bin, &tables.p, &input, true, &load_args)?;
    if let Some(c) = &tables.c {
        let _ = std::fs::remove_dir_all(c);
        copy_dir(&tables.p, c)?;
    }
    let mut figures = step.figures;
    figures.insert("gen_s".into(), gen_s);
    eprintln!(
        "initial: {} rows, {:.0} bytes, load --compact {:.2} s",
        args.initial_rows,
        figures.get("stored_bytes").copied().unwrap_or(0.0),
        figures.get("wall_s").copied().unwrap_or(0.0)
    );
    Ok(figures)
}

/// Which rows `generate` draws: `seed`'s, of days [first_day, first_day + days) after
/// 2013-07-01, on the counters of `world_seed`.
pub(crate) struct Draw {
    pub seed: u64,
    pub world_seed: u64,
    pub first_day: u32,
    pub days: u32,
}

/// `ravel-load gen` of `rows` rows of `draw`; its wall seconds.
pub(crate) fn generate(bin: &Path, rows: u64, draw: Draw, out: &Path) -> Result<f64> {
    let m = exec::run(
        Command::new(bin)
            .args([
                "gen",
                "--rows",
                &rows.to_string(),
                "--seed",
                &draw.seed.to_string(),
            ])
            .args(["--world-seed", &draw.world_seed.to_string()])
            .args(["--first-day", &draw.first_day.to_string()])
            .args(["--days", &draw.days.to_string()])
            .arg("--out")
            .arg(out),
    )?;
    Ok(m.wall_s)
}

/// Load `i`: the rows of day 31 + i − 1, into P and (when compared) C.
fn one_load(
    args: &IngestArgs,
    bin: &Path,
    dir: &Path,
    tables: &Tables,
    i: u32,
    sums: (&mut Sums, &mut Sums),
) -> Result<LoadRecord> {
    let day = INITIAL_DAYS + i - 1;
    let input = dir.join("day.parquet");
    let draw = Draw {
        seed: args.seed + u64::from(i),
        world_seed: args.seed,
        first_day: day,
        days: 1,
    };
    let gen_s = generate(bin, args.load_rows, draw, &input)?;
    let p = load_p(bin, &tables.p, &input, &args.load_args, sums.0)
        .with_context(|| format!("load {i} into P"))?;
    let c = match &tables.c {
        Some(c) => Some(
            load_c(bin, c, &input, &args.load_args, sums.1)
                .with_context(|| format!("load {i} into C"))?,
        ),
        None => None,
    };
    Ok(LoadRecord {
        load: i,
        day,
        rows: args.load_rows,
        gen_s,
        p,
        c,
    })
}

/// `ravel-load <command> --store S --table hits --json <extra>`: the process and its report.
fn ravel_load(bin: &Path, command: &str, store: &Path, extra: &[String]) -> Result<Report> {
    let mut cmd = Command::new(bin);
    cmd.arg(command)
        .arg("--store")
        .arg(store)
        .args(["--table", TABLE, "--json"])
        .args(extra);
    let measured = exec::run(&mut cmd)?;
    let json = serde_json::from_str(&measured.stdout)
        .with_context(|| format!("{command}'s --json report"))?;
    Ok(Report { measured, json })
}

fn load_args(input: &Path, load_args: &[String], more: &[&str]) -> Vec<String> {
    let mut out = vec!["--input".into(), input.display().to_string()];
    out.extend(load_args.iter().cloned());
    out.extend(more.iter().map(|s| s.to_string()));
    out
}

/// P: `load`, its maintenance step included (the report's `maintenance`).
fn load_p(
    bin: &Path,
    store: &Path,
    input: &Path,
    extra: &[String],
    sums: &mut Sums,
) -> Result<TableLoad> {
    let load = ravel_load(bin, "load", store, &load_args(input, extra, &[]))?;
    let merge = Merge::of(&load.json["maintenance"])?;
    let loaded = load.u64("stored_bytes");
    Ok(TableLoad {
        loaded_bytes: loaded,
        load_s: load.f64("wall_s"),
        cumulative_wa: sums.add(loaded, merge.as_ref().map_or(0, |m| m.written_bytes)),
        merge,
        process_s: load.measured.wall_s,
        peak_rss_mb: load.rss_mb(),
    })
}

/// C: `load --no-maintain`, then `compact`.
fn load_c(
    bin: &Path,
    store: &Path,
    input: &Path,
    extra: &[String],
    sums: &mut Sums,
) -> Result<TableLoad> {
    let load = ravel_load(
        bin,
        "load",
        store,
        &load_args(input, extra, &["--no-maintain"]),
    )?;
    let compact = ravel_load(bin, "compact", store, &steps::compact_args(extra))?;
    let merge = Merge::of(&compact.json)?;
    let loaded = load.u64("stored_bytes");
    Ok(TableLoad {
        loaded_bytes: loaded,
        load_s: load.f64("wall_s"),
        cumulative_wa: sums.add(loaded, merge.as_ref().map_or(0, |m| m.written_bytes)),
        merge,
        process_s: load.measured.wall_s + compact.measured.wall_s,
        peak_rss_mb: load.rss_mb().max(compact.rss_mb()),
    })
}

/// Copies the directory `from` (files and subdirectories) to a new directory `to`.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}
