//! `ravel-bench serve`: files of a fixed size arrive at a fixed rate for a fixed time into a
//! running `ravel-load serve`, on a local store, the service killed and restarted at evenly
//! spread moments.
//!
//! The base (July 2013) is loaded with `load --compact` into a table of the hits layout. Every
//! file is generated first (file k: the rows of day 31 + k, seed `seed + 1 + k`, on the
//! counters of `seed`, so no two files share a WatchID) into a staging directory, then renamed
//! into the landing directory at its moment. The table's status is polled every 0.5 s; each
//! file's landing-to-visible latency, the write amplification (the service's merge bytes over
//! the bytes that arrived), the depth against its bound, the processes' peak RSS and CPU are
//! recorded. After the last arrival settles the service stops, the table is counted (rows and
//! distinct WatchIDs against the expected), and a fresh service sits idle for a minute.

mod arrival;
mod chart;
mod figures;
pub(crate) mod process;
mod record;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::exec;
use crate::ingest::{Draw, INITIAL_DAYS, generate};
use crate::steps::{self, TABLE};
use arrival::{Outcome, Plan, Staged};
use process::Service;
use record::{Exactness, FORMAT, Idle, Listings, Params, ServeResult};

/// How long a service sits idle for the idle figure, and how long its listings are traced
/// after that (apart: tracing costs the traced process CPU).
const IDLE: Duration = Duration::from_secs(60);
const TRACE: Duration = Duration::from_secs(30);

#[derive(Args)]
pub struct ServeArgs {
    /// Rows of the table before the arrival (July 2013), published with `load --compact`.
    #[arg(long, default_value_t = 10_000_000)]
    initial_rows: u64,
    /// Files that arrive.
    #[arg(long, default_value_t = 300)]
    files: u32,
    /// Rows of each file.
    #[arg(long, default_value_t = 20_000)]
    file_rows: u64,
    /// Seconds between two arrivals.
    #[arg(long, default_value_t = 2.0)]
    interval_s: f64,
    /// SIGKILLs of the service at evenly spread moments of the arrival, each followed at once
    /// by a new service.
    #[arg(long, default_value_t = 0)]
    kills: u32,
    /// Generator seed of the base and of the world (counters); file k draws with seed + 1 + k.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The service's `poll_interval`.
    #[arg(long, default_value = "5s")]
    poll_interval: String,
    /// The table's `batch_age` (the service's default: 60s).
    #[arg(long, default_value = "60s")]
    batch_age: String,
    /// How long after the last arrival the service may take to load everything and bring the
    /// depth within its bound.
    #[arg(long, default_value_t = 900)]
    settle_timeout_s: u64,
    /// Working directory: the store, the staged and landed files, the service's log (default:
    /// a new directory in the system's temp dir, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the default working directory.
    #[arg(long)]
    keep: bool,
    /// Directory of the results: `serve.json` and `serve.svg`.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// The ravel-load binary (default: the one beside this ravel-bench).
    #[arg(long)]
    bin: Option<PathBuf>,
}

/// Where the run's files live.
struct Paths {
    store: PathBuf,
    staging: PathBuf,
    landing: PathBuf,
    config: PathBuf,
    log: PathBuf,
}

impl Paths {
    fn in_dir(dir: &Path) -> Paths {
        Paths {
            store: dir.join("store"),
            staging: dir.join("staging"),
            landing: dir.join("landing"),
            config: dir.join("serve.toml"),
            log: dir.join("service.log"),
        }
    }
}

pub fn run(args: ServeArgs) -> Result<()> {
    let bin = crate::ravel_load_bin(args.bin.as_deref())?;
    let mut doc = new_result(&args, &bin)?;
    eprintln!("{} · {} cores", doc.build.version, doc.machine.cores);
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let dir = crate::new_work_dir(args.dir.as_deref(), args.keep)?;
    let outcome = drive(&args, &bin, &dir.path, &mut doc);
    doc.error = outcome.as_ref().err().map(|e| format!("{e:#}"));
    let json = args.out_dir.join("serve.json");
    doc.write(&json)?;
    print!("{}", chart::summary(&doc));
    let svg = args.out_dir.join("serve.svg");
    std::fs::write(&svg, chart::svg(&doc)?)
        .with_context(|| format!("writing {}", svg.display()))?;
    eprintln!("wrote {} and {}", json.display(), svg.display());
    outcome
}

fn new_result(args: &ServeArgs, bin: &Path) -> Result<ServeResult> {
    Ok(ServeResult {
        format: FORMAT.into(),
        started: chrono::Utc::now().to_rfc3339(),
        build: crate::build_of(bin)?,
        machine: crate::machine::facts(),
        params: Params {
            initial_rows: args.initial_rows,
            files: args.files,
            file_rows: args.file_rows,
            interval_s: args.interval_s,
            kills: args.kills,
            seed: args.seed,
            poll_interval: args.poll_interval.clone(),
            batch_age: args.batch_age.clone(),
            sample_s: arrival::SAMPLE.as_secs_f64(),
            tier: tier(bin)?,
        },
        base: Default::default(),
        files: Vec::new(),
        samples: Vec::new(),
        processes: Vec::new(),
        figures: None,
        exactness: None,
        idle: None,
        error: None,
    })
}

/// `ravel-load tier --json`.
fn tier(bin: &Path) -> Result<serde_json::Value> {
    let m = exec::run(Command::new(bin).args(["tier", "--json"]))?;
    serde_json::from_str(&m.stdout).context("tier's --json report")
}

/// The base, the staged files, the arrival, the count, the idle minute; recorded into `doc`
/// as they finish.
fn drive(args: &ServeArgs, bin: &Path, dir: &Path, doc: &mut ServeResult) -> Result<()> {
    let paths = Paths::in_dir(&std::path::absolute(dir)?);
    doc.base = base(args, bin, dir, &paths.store)?;
    let staged = stage(args, bin, &paths.staging)?;
    write_config(args, &paths)?;
    let expected_rows = args.initial_rows + u64::from(args.files) * args.file_rows;
    let plan = Plan {
        bin,
        config: &paths.config,
        log: &paths.log,
        landing: &paths.landing,
        staged,
        interval: Duration::from_secs_f64(args.interval_s),
        kills: args.kills,
        expected_rows,
        settle_timeout: Duration::from_secs(args.settle_timeout_s),
    };
    eprintln!(
        "arrival: {} files every {} s, {} kills",
        args.files, args.interval_s, args.kills
    );
    let mut out = Outcome::default();
    let arrived = arrival::run(&plan, &mut out);
    record_outcome(doc, out, args);
    arrived?;
    let exact = count(bin, &paths.store, expected_rows)?;
    let is_exact = exact.exact();
    doc.exactness = Some(exact);
    doc.idle = Some(idle(bin, &paths, seconds_of(&args.poll_interval))?);
    if !is_exact {
        bail!("the table does not hold every arrived row exactly once");
    }
    Ok(())
}

fn record_outcome(doc: &mut ServeResult, mut out: Outcome, args: &ServeArgs) {
    figures::visibility(
        &mut out.files,
        &out.samples,
        args.initial_rows,
        args.file_rows,
    );
    doc.figures = Some(figures::figures(
        &out.files,
        &out.samples,
        &out.processes,
        out.settle_s,
    ));
    doc.files = out.files;
    doc.samples = out.samples;
    doc.processes = out.processes;
}

/// Generates the base rows and loads them with `load --compact` into a new table of the hits
/// layout in `store`; the figures of the load.
fn base(
    args: &ServeArgs,
    bin: &Path,
    dir: &Path,
    store: &Path,
) -> Result<std::collections::BTreeMap<String, f64>> {
    let input = dir.join("base.parquet");
    let draw = Draw {
        seed: args.seed,
        world_seed: args.seed,
        first_day: 0,
        days: INITIAL_DAYS,
    };
    let gen_s = generate(bin, args.initial_rows, draw, &input)?;
    let step = steps::load("base", bin, store, &input, true, &["--compact".to_string()])?;
    let _ = std::fs::remove_file(&input);
    let mut figures = step.figures;
    figures.insert("gen_s".into(), gen_s);
    eprintln!(
        "base: {} rows, {:.0} bytes, load --compact {:.2} s",
        args.initial_rows,
        figures.get("stored_bytes").copied().unwrap_or(0.0),
        figures.get("wall_s").copied().unwrap_or(0.0)
    );
    Ok(figures)
}

/// Generates every file into `staging`: file k holds the rows of day 31 + k.
fn stage(args: &ServeArgs, bin: &Path, staging: &Path) -> Result<Vec<Staged>> {
    let _ = std::fs::remove_dir_all(staging);
    std::fs::create_dir_all(staging)?;
    let started = Instant::now();
    let mut staged = Vec::with_capacity(args.files as usize);
    for k in 0..args.files {
        let name = format!("file-{k:05}.parquet");
        let path = staging.join(&name);
        let draw = Draw {
            seed: args.seed + 1 + u64::from(k),
            world_seed: args.seed,
            first_day: INITIAL_DAYS + k,
            days: 1,
        };
        generate(bin, args.file_rows, draw, &path)?;
        staged.push(Staged { path, name });
    }
    eprintln!(
        "staged {} files in {:.1} s",
        args.files,
        started.elapsed().as_secs_f64()
    );
    Ok(staged)
}

/// The service's configuration: the table `hits` of `store`, landing in `landing`.
fn write_config(args: &ServeArgs, paths: &Paths) -> Result<()> {
    let _ = std::fs::remove_dir_all(&paths.landing);
    std::fs::create_dir_all(&paths.landing)?;
    let text = format!(
        "poll_interval = \"{}\"\n\n[[table]]\nstore = \"{}\"\nname = \"{TABLE}\"\nlanding = \"{}\"\npattern = \"*.parquet\"\nbatch_age = \"{}\"\n",
        args.poll_interval,
        paths.store.display(),
        paths.landing.display(),
        args.batch_age
    );
    std::fs::write(&paths.config, text)
        .with_context(|| format!("writing {}", paths.config.display()))
}

/// Rows and distinct WatchIDs of the table, against `expected`.
fn count(bin: &Path, store: &Path, expected: u64) -> Result<Exactness> {
    let sql = "SELECT COUNT(*), COUNT(DISTINCT \"WatchID\") FROM hits";
    let m = exec::run(
        Command::new(bin)
            .args(["query", "--store", &store.to_string_lossy()])
            .args(["--table", TABLE, "--format", "csv", sql]),
    )?;
    let line = m.stdout.lines().rfind(|l| !l.trim().is_empty());
    let parsed = line.and_then(|l| {
        let (rows, distinct) = l.trim().split_once(',')?;
        Some((rows.parse::<u64>().ok()?, distinct.parse::<u64>().ok()?))
    });
    let Some((rows, distinct)) = parsed else {
        bail!(
            "counting the table: no \"rows,distinct\" line in {:?}",
            m.stdout
        );
    };
    Ok(Exactness {
        expected_rows: expected,
        rows,
        distinct_watch_ids: distinct,
        lost: expected as i64 - distinct as i64,
        duplicated: rows as i64 - distinct as i64,
    })
}

/// A new service on the finished table: its CPU over [`IDLE`] once it has polled, then its
/// landing listings.
fn idle(bin: &Path, paths: &Paths, poll_s: Option<f64>) -> Result<Idle> {
    eprintln!("idle: {} s", IDLE.as_secs());
    let service = Service::start(bin, &paths.config, &paths.log)?;
    let measured = idle_usage(&service);
    let listings = measured.is_ok().then(|| listings(&service, paths, poll_s));
    let stopped = service.terminate();
    let mut idle = measured?;
    stopped?;
    idle.listings = listings.flatten();
    Ok(idle)
}

/// The landing directory's listings over [`TRACE`] of the idle `service`.
fn listings(service: &Service, paths: &Paths, poll_s: Option<f64>) -> Option<Listings> {
    let trace = paths.log.with_file_name("idle.strace");
    let n = process::directory_opens(service.pid(), &paths.landing, TRACE, &trace)?;
    let window_s = TRACE.as_secs_f64();
    Some(Listings {
        window_s,
        listings: n,
        per_poll: poll_s.map(|p| n as f64 * p / window_s),
    })
}

/// Seconds of a duration as the configuration writes it (`5s`, `500ms`).
fn seconds_of(text: &str) -> Option<f64> {
    match text.strip_suffix("ms") {
        Some(ms) => Some(ms.parse::<f64>().ok()? / 1000.0),
        None => text.strip_suffix('s')?.parse().ok(),
    }
}

fn idle_usage(service: &Service) -> Result<Idle> {
    let start = Instant::now();
    loop {
        let s = service.status(TABLE);
        if s.is_ok_and(|s| !s["version"].is_null() && s["pending_files"] == 0) {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            bail!("the idle service never polled the table");
        }
        std::thread::sleep(arrival::SAMPLE);
    }
    let before = service.usage()?;
    let t = Instant::now();
    std::thread::sleep(IDLE);
    let after = service.usage()?;
    let seconds = t.elapsed().as_secs_f64();
    let cpu_s = after.cpu_s - before.cpu_s;
    Ok(Idle {
        seconds,
        cpu_s,
        core_share: cpu_s / seconds,
        peak_rss_mb: after.peak_rss_bytes as f64 / 1e6,
        listings: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_the_configuration_writes_them() {
        assert_eq!(seconds_of("5s"), Some(5.0));
        assert_eq!(seconds_of("500ms"), Some(0.5));
        assert_eq!(seconds_of("1m"), None);
    }
}
