//! `ravel-bench life`: a table's years compressed into minutes. Small files land at a high
//! rate into a running `ravel-load serve` on the test S3 server, with retention windows of
//! seconds and the default maintenance, until the table has `--versions` versions; every
//! `--every` versions the landing pauses and the costs that must stay flat as versions grow
//! are measured:
//!
//! - the settled service over an idle window: its CPU and requests per poll, its RSS;
//! - what the store holds for the log: `_delta_log` objects and bytes, the newest checkpoint;
//! - a fresh service (the running one stopped by SIGTERM): its time to a status of the table
//!   it polled, and its requests meanwhile;
//! - `ravel-load query`, delta-rs and polars opening the table and counting its rows;
//! - the landing listings of the segment: keys per poll against the new keys and lookback.
//!
//! Requests are counted by the test S3 server itself (`ravel_testkit::S3Server`), in process;
//! files land by a rename into the server's directory, so the bench's writes cost none.

mod chart;
mod land;
mod measure;
mod record;
mod synthetic;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use ravel_testkit::S3Server;

use crate::exec;
use crate::serve::process::Service;
use land::Lander;
use record::{Checkpoint, FORMAT, LifeResult, Params, Requests, Segment};

const TABLE: &str = "life";
/// The store's prefix in the bucket.
const STORE: &str = "store";
const DEFAULT_VENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/life-venv");
/// How often the table's status is asked while landing and settling.
const ASK: Duration = Duration::from_millis(100);
/// How long the service may go without a new version while files land, or take to settle.
const STALL: Duration = Duration::from_secs(300);

#[derive(Args)]
pub struct LifeArgs {
    /// Versions the table reaches.
    #[arg(long, default_value_t = 10_000)]
    versions: u64,
    /// Versions between two measurements.
    #[arg(long, default_value_t = 1_000)]
    every: u64,
    /// Rows of each landing file.
    #[arg(long, default_value_t = 300)]
    file_rows: usize,
    /// Files landed per second.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// The service's `poll_interval`.
    #[arg(long, default_value = "100ms")]
    poll_interval: String,
    /// The table's `batch_age`.
    #[arg(long, default_value = "100ms")]
    batch_age: String,
    /// The table's `settle`.
    #[arg(long, default_value = "100ms")]
    settle: String,
    /// The table's `cursor_lookback`.
    #[arg(long, default_value = "5s")]
    cursor_lookback: String,
    /// The table's `gc_interval`.
    #[arg(long, default_value = "30s")]
    gc_interval: String,
    /// The table's files window (`layout retention set --files`).
    #[arg(long, default_value = "30s")]
    files_window: String,
    /// The table's inputs window (`--inputs`).
    #[arg(long, default_value = "60s")]
    inputs_window: String,
    /// The table's log window (`--log`).
    #[arg(long, default_value = "60s")]
    log_window: String,
    /// Seconds of each idle window.
    #[arg(long, default_value_t = 10.0)]
    idle_s: f64,
    /// The Python environment of delta-rs and polars (made with pip when missing).
    #[arg(long, default_value = DEFAULT_VENV)]
    venv: PathBuf,
    /// Measure no Python reader.
    #[arg(long)]
    no_python: bool,
    /// Reach each measurement mostly by versions committed straight into the store, as
    /// another writer's loads of one input each and no rows, with the service stopped (a
    /// thousand times faster than landing files); the last this many versions of each
    /// segment still come from files landing through the service. 0: every version does.
    #[arg(long, default_value_t = 0)]
    landed_per_segment: u64,
    /// Working directory: the config, the service's log, the staged files (default: a new
    /// directory in the system's temp dir, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the default working directory.
    #[arg(long)]
    keep: bool,
    /// Directory of the results: `life.json` and `life.svg`.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// The ravel-load binary (default: the one beside this ravel-bench).
    #[arg(long)]
    bin: Option<PathBuf>,
}

pub fn run(args: LifeArgs) -> Result<()> {
    let bin = crate::ravel_load_bin(args.bin.as_deref())?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let dir = crate::new_work_dir(args.dir.as_deref(), args.keep)?;
    let python = python(&args);
    let mut doc = new_result(&args, &bin, &python.about)?;
    eprintln!("{} · {} cores", doc.build.version, doc.machine.cores);
    let json = args.out_dir.join("life.json");
    let outcome = drive(&args, &bin, &dir.path, python.path.as_deref(), &mut doc);
    doc.error = outcome.as_ref().err().map(|e| format!("{e:#}"));
    doc.flatness = chart::flatness(&doc);
    doc.write(&json)?;
    print!("{}", chart::summary(&doc));
    let svg = args.out_dir.join("life.svg");
    std::fs::write(&svg, chart::svg(&doc)?)
        .with_context(|| format!("writing {}", svg.display()))?;
    eprintln!("wrote {} and {}", json.display(), svg.display());
    outcome
}

fn new_result(args: &LifeArgs, bin: &Path, python: &str) -> Result<LifeResult> {
    Ok(LifeResult {
        format: FORMAT.into(),
        started: chrono::Utc::now().to_rfc3339(),
        build: crate::build_of(bin)?,
        machine: crate::machine::facts(),
        params: Params {
            versions: args.versions,
            every: args.every,
            file_rows: args.file_rows,
            rate: args.rate,
            poll_interval: args.poll_interval.clone(),
            batch_age: args.batch_age.clone(),
            settle: args.settle.clone(),
            cursor_lookback: args.cursor_lookback.clone(),
            gc_interval: args.gc_interval.clone(),
            files_window: args.files_window.clone(),
            inputs_window: args.inputs_window.clone(),
            log_window: args.log_window.clone(),
            idle_s: args.idle_s,
            landed_per_segment: args.landed_per_segment,
        },
        python: python.to_string(),
        checkpoints: Vec::new(),
        flatness: Default::default(),
        error: None,
    })
}

/// The Python of delta-rs and polars, or why there is none.
struct Python {
    path: Option<PathBuf>,
    about: String,
}

/// The venv's Python once `deltalake` and `polars` import in it (made, and the packages
/// installed with pip, when missing).
fn python(args: &LifeArgs) -> Python {
    if args.no_python {
        return Python {
            path: None,
            about: "not measured (--no-python)".into(),
        };
    }
    let py = args.venv.join("bin").join("python");
    let versions = || {
        let probe = "import deltalake, polars; print('deltalake', deltalake.__version__, 'polars', polars.__version__)";
        exec::run(Command::new(&py).args(["-c", probe])).map(|m| m.stdout.trim().to_string())
    };
    let made = versions().or_else(|_| {
        if !py.exists() {
            exec::run(Command::new("python3").args(["-m", "venv"]).arg(&args.venv))?;
        }
        exec::run(Command::new(&py).args(["-m", "pip", "install", "-q", "deltalake", "polars"]))?;
        versions()
    });
    match made {
        Ok(about) => Python {
            path: Some(py),
            about,
        },
        Err(e) => Python {
            path: None,
            about: format!("unavailable: {e:#}"),
        },
    }
}

/// Where the run's pieces are.
struct Run<'a> {
    args: &'a LifeArgs,
    bin: &'a Path,
    s3: S3Server,
    config: PathBuf,
    log: PathBuf,
    /// `s3://bucket/store`.
    store: String,
    /// The table's directory behind the server.
    table_dir: PathBuf,
    python: Option<&'a Path>,
    json: PathBuf,
}

/// Kills the service it holds when dropped (a run that stops early leaves none behind).
struct Running(Option<Service>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            let _ = s.kill();
        }
    }
}

fn drive(
    args: &LifeArgs,
    bin: &Path,
    dir: &Path,
    python: Option<&Path>,
    doc: &mut LifeResult,
) -> Result<()> {
    let dir = std::path::absolute(dir)?;
    let s3 = S3Server::start();
    let bucket_dir = s3.root().join(&s3.bucket);
    let run = Run {
        args,
        bin,
        store: s3.url(STORE),
        table_dir: bucket_dir.join(STORE).join(TABLE),
        config: dir.join("life.toml"),
        log: dir.join("service.log"),
        python,
        json: args.out_dir.join("life.json"),
        s3,
    };
    let mut lander = Lander::new(&bucket_dir, &dir.join("staging"), args.file_rows)?;
    set_layout(&run, &dir)?;
    write_config(&run)?;
    // The table has no version yet: this first service is not timed.
    let service = Service::start_env(bin, &run.config, &run.log, &run.s3.env())?;
    let mut running = Running(Some(service));
    let began = Instant::now();
    let mut target = args.every;
    while target <= args.versions {
        let c = checkpoint(&run, &mut running, &mut lander, target, began)?;
        eprintln!("{}", chart::line(&c));
        target = target.max(c.version) / args.every * args.every + args.every;
        doc.checkpoints.push(c);
        doc.write(&run.json)?;
    }
    let service = running.0.take().context("no service")?;
    service.terminate()
}

/// Lands files until the table reaches `target`, then measures.
fn checkpoint(
    run: &Run,
    running: &mut Running,
    lander: &mut Lander,
    target: u64,
    began: Instant,
) -> Result<Checkpoint> {
    let a = run.args;
    if a.landed_per_segment > 0 {
        // The versions committed straight take the schema of a load the service published.
        let service = running.0.as_ref().context("no service")?;
        if status(service)?.version == 0 {
            segment(run, service, lander, 2)?;
        }
        grow(run, running, target.saturating_sub(a.landed_per_segment))?;
    }
    let service = running.0.as_ref().context("no service")?;
    let segment = segment(run, service, lander, target)?;
    let version = status(service)?.version;
    let at_s = began.elapsed().as_secs_f64();
    let window = Duration::from_secs_f64(a.idle_s);
    let poll_s = seconds_of(&a.poll_interval).context("--poll-interval")?;
    let idle = measure::idle(service, &run.s3, window, poll_s)?;
    running.0.take().context("no service")?.terminate()?;
    let log = measure::log_figures(&run.table_dir)?;
    let (service, start) = measure::start(run.bin, &run.config, &run.log, &run.s3, TABLE)?;
    running.0 = Some(service);
    let readers = measure::Readers {
        bin: run.bin,
        python: run.python,
        store: &run.store,
        table: TABLE,
    };
    let opens = measure::opens(&readers, &run.s3)?;
    if opens.query_rows != lander.rows() {
        bail!(
            "the table counts {} rows, {} landed",
            opens.query_rows,
            lander.rows()
        );
    }
    Ok(Checkpoint {
        version,
        at_s,
        files_landed: lander.landed,
        segment,
        log,
        idle,
        start,
        opens,
    })
}

/// Stops the service, commits versions straight into the store until the table has
/// `until`, and starts a service again (not timed).
fn grow(run: &Run, running: &mut Running, until: u64) -> Result<()> {
    let service = running.0.take().context("no service")?;
    let now = status(&service)?.version;
    service.terminate()?;
    if until > now {
        let store_dir = run.table_dir.parent().context("the table's store")?;
        let t = Instant::now();
        synthetic::commit(store_dir, TABLE, now, until - now)?;
        let rate = (until - now) as f64 / t.elapsed().as_secs_f64();
        eprintln!("committed versions {now}..{until} straight ({rate:.0} a second)");
    }
    let service = Service::start_env(run.bin, &run.config, &run.log, &run.s3.env())?;
    running.0 = Some(service);
    Ok(())
}

/// What the status says of the table.
struct Status {
    version: u64,
    /// Pending or settling files, or a load or merge to do.
    busy: bool,
}

fn status(service: &Service) -> Result<Status> {
    let s = service.status(TABLE)?;
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let action = s["next"]["action"].as_str().unwrap_or("");
    Ok(Status {
        version: n("version"),
        busy: n("pending_files") + n("settling_files") > 0 || matches!(action, "load" | "merge"),
    })
}

/// Lands files at the rate until the table reaches `target`, then waits until the service
/// has nothing left to do.
fn segment(run: &Run, service: &Service, lander: &mut Lander, target: u64) -> Result<Segment> {
    run.s3.take_requests();
    let t = Instant::now();
    let first = status(service)?.version;
    let landed = lander.landed;
    let (mut version, mut moved) = (first, Instant::now());
    while version < target {
        let due = (t.elapsed().as_secs_f64() * run.args.rate) as u64;
        while lander.landed - landed < due {
            lander.land()?;
        }
        std::thread::sleep(ASK);
        let now = status(service)?.version;
        if now > version {
            (version, moved) = (now, Instant::now());
        } else if moved.elapsed() > STALL {
            bail!("no new version for {STALL:?} at version {version}");
        }
    }
    let settled = Instant::now();
    while status(service)?.busy {
        if settled.elapsed() > STALL {
            bail!("the service did not settle within {STALL:?}");
        }
        std::thread::sleep(ASK);
    }
    let seconds = t.elapsed().as_secs_f64();
    let versions = status(service)?.version - first;
    let counts = run.s3.take_requests();
    let landing = measure::landing(&counts);
    Ok(Segment {
        seconds,
        versions,
        versions_per_s: versions as f64 / seconds,
        files: lander.landed - landed,
        landing_lists: landing.requests,
        landing_keys_mean: landing.keys as f64 / landing.requests.max(1) as f64,
        landing_keys_max: landing.max_keys,
        requests: Requests::from(&counts),
    })
}

/// `ravel-load layout` of the table, on the server.
fn layout(run: &Run, args: &[&str]) -> Result<()> {
    let mut cmd = Command::new(run.bin);
    cmd.envs(run.s3.env())
        .args(["layout", "--store", &run.store, "--table", TABLE])
        .args(args);
    exec::run(&mut cmd).map(|_| ())
}

/// The table's schema (from a sample file), its clustering (stream, hourly time buckets,
/// id) and its retention windows.
fn set_layout(run: &Run, dir: &Path) -> Result<()> {
    let sample = dir.join("sample.parquet");
    Lander::new(dir, &dir.join("staging"), 10)?.write(&sample)?;
    let from = sample.to_string_lossy();
    layout(run, &["schema", "set", "--from", &from])?;
    layout(run, &["stream", "set", "--column", "stream"])?;
    layout(run, &["time", "set", "--column", "ts"])?;
    let key = [
        "clustering-key",
        "set",
        "--column",
        "id",
        "--bucket-width",
        "1h",
    ];
    layout(run, &key)?;
    layout(run, &["bloom-scope", "set", "--scope", "none"])?;
    let a = run.args;
    layout(
        run,
        &[
            "retention",
            "set",
            "--files",
            &a.files_window,
            "--inputs",
            &a.inputs_window,
            "--log",
            &a.log_window,
        ],
    )
}

/// The service's configuration: the table, landing in the server's `landing/` prefix.
fn write_config(run: &Run) -> Result<()> {
    let a = run.args;
    let text = format!(
        "poll_interval = \"{}\"\n\n[[table]]\nstore = \"{}\"\nname = \"{TABLE}\"\nlanding = \"{}\"\n\
         pattern = \"*.parquet\"\nbatch_age = \"{}\"\nsettle = \"{}\"\ncursor_lookback = \"{}\"\n\
         gc_interval = \"{}\"\n",
        a.poll_interval,
        run.store,
        run.s3.url(land::LANDING),
        a.batch_age,
        a.settle,
        a.cursor_lookback,
        a.gc_interval
    );
    std::fs::write(&run.config, text).with_context(|| format!("writing {}", run.config.display()))
}

/// Seconds of a duration as the configuration and `retention set` write them (`500ms`, `5s`,
/// `2m`, `1h`).
pub fn seconds_of(text: &str) -> Option<f64> {
    let units = [
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
        ("d", 86400.0),
    ];
    units.iter().find_map(|(unit, scale)| {
        let n: f64 = text.strip_suffix(unit)?.parse().ok()?;
        Some(n * scale)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(seconds_of("500ms"), Some(0.5));
        assert_eq!(seconds_of("30s"), Some(30.0));
        assert_eq!(seconds_of("2m"), Some(120.0));
        assert_eq!(seconds_of("1h"), Some(3600.0));
    }
}
