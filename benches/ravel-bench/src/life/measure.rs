//! The figures of one checkpoint: what the store holds for the table, a fresh service's start,
//! the settled service over an idle window, and the readers opening the table.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ravel_testkit::{Listed, RequestCounts, S3Server};

use super::land::LANDING;
use super::record::{IdleFigures, LogFigures, Opens, Requests, StartFigures};
use crate::exec;
use crate::serve::process::Service;

/// How often a starting service is asked for its status.
const ASK: Duration = Duration::from_millis(5);
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Objects and bytes under `dir` (a directory of the server's bucket), recursively.
fn walk(dir: &Path, each: &mut dyn FnMut(&Path, u64)) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    for entry in entries {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            walk(&entry.path(), each)?;
        } else {
            each(&entry.path(), meta.len());
        }
    }
    Ok(())
}

/// The version of a checkpoint part's name (`00000000000000001000.checkpoint.parquet` or
/// `….checkpoint.0000000001.0000000002.parquet`).
fn checkpoint_version(name: &str) -> Option<u64> {
    let (version, rest) = name.split_once('.')?;
    rest.starts_with("checkpoint")
        .then(|| version.parse().ok())?
}

/// The table's objects as the server's directory holds them (read from disk: no request).
pub fn log_figures(table_dir: &Path) -> Result<LogFigures> {
    let mut f = LogFigures::default();
    walk(table_dir, &mut |_, len| {
        f.table_files += 1;
        f.table_bytes += len;
    })?;
    let mut parts: Vec<(u64, u64)> = Vec::new();
    walk(&table_dir.join("_delta_log"), &mut |path, len| {
        f.files += 1;
        f.bytes += len;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(v) = name.as_deref().and_then(checkpoint_version) {
            parts.push((v, len));
        }
    })?;
    f.checkpoint_version = parts.iter().map(|p| p.0).max();
    f.checkpoint_bytes = (parts.iter())
        .filter(|p| Some(p.0) == f.checkpoint_version)
        .map(|p| p.1)
        .sum();
    Ok(f)
}

/// Starts a service and times it until it answers a status of `table` it polled; the
/// requests it made meanwhile.
pub fn start(
    bin: &Path,
    config: &Path,
    log: &Path,
    s3: &S3Server,
    table: &str,
) -> Result<(Service, StartFigures)> {
    s3.take_requests();
    let t = Instant::now();
    let service = Service::start_env(bin, config, log, &s3.env())?;
    let listen_s = t.elapsed().as_secs_f64();
    let mut first_status_s = None;
    loop {
        if let Ok(s) = service.status(table) {
            first_status_s.get_or_insert(t.elapsed().as_secs_f64());
            if s["polled"] == true {
                break;
            }
        }
        if t.elapsed() > START_TIMEOUT {
            let _ = service.kill();
            bail!("the service never polled the table within {START_TIMEOUT:?}");
        }
        std::thread::sleep(ASK);
    }
    let polled_s = t.elapsed().as_secs_f64();
    let requests = Requests::from(&s3.take_requests());
    let figures = StartFigures {
        listen_s,
        first_status_s: first_status_s.unwrap_or(polled_s),
        polled_s,
        requests,
    };
    Ok((service, figures))
}

/// The settled `service` over `window`: its CPU, memory and requests per poll.
pub fn idle(
    service: &Service,
    s3: &S3Server,
    window: Duration,
    poll_s: f64,
) -> Result<IdleFigures> {
    s3.take_requests();
    let before = service.usage()?;
    let t = Instant::now();
    std::thread::sleep(window);
    let after = service.usage()?;
    let seconds = t.elapsed().as_secs_f64();
    let counts = s3.take_requests();
    let polls = seconds / poll_s;
    let cpu_s = after.cpu_s - before.cpu_s;
    let landing = landing(&counts);
    Ok(IdleFigures {
        seconds,
        polls,
        cpu_ms_per_poll: cpu_s * 1e3 / polls,
        core_share: cpu_s / seconds,
        rss_mb: after.rss_bytes as f64 / 1e6,
        peak_rss_mb: after.peak_rss_bytes as f64 / 1e6,
        requests_per_poll: counts.total() as f64 / polls,
        landing_lists: landing.requests,
        landing_keys_max: landing.max_keys,
        landing_bytes_per_list: landing.bytes as f64 / landing.requests.max(1) as f64,
        requests: Requests::from(&counts),
    })
}

/// One reader's open of the table.
struct Opened {
    seconds: f64,
    rows: Option<u64>,
    requests: u64,
}

/// `ravel-load query` counting the rows: its wall seconds, the rows, its requests.
fn query(bin: &Path, s3: &S3Server, store: &str, table: &str) -> Result<Opened> {
    s3.take_requests();
    let sql = format!("SELECT COUNT(*) FROM {table}");
    let m = exec::run(
        Command::new(bin)
            .envs(s3.env())
            .args(["query", "--store", store, "--table", table])
            .args(["--format", "csv", &sql]),
    )?;
    let requests = s3.take_requests().total();
    let rows = (m.stdout.lines())
        .rev()
        .find_map(|l| l.trim().parse::<u64>().ok())
        .with_context(|| format!("no count in {:?}", m.stdout))?;
    Ok(Opened {
        seconds: m.wall_s,
        rows: Some(rows),
        requests,
    })
}

/// Opens the table with delta-rs (`to_pyarrow_dataset`) or counts its rows with polars
/// (`scan_delta`), the store's settings from the environment; prints seconds and rows.
const PY_OPEN: &str = r#"
import os, sys, time
mode, uri = sys.argv[1], sys.argv[2]
opts = {k: os.environ[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ALLOW_HTTP")}
if mode == "deltars":
    import deltalake
    t = time.perf_counter()
    deltalake.DeltaTable(uri, storage_options=opts).to_pyarrow_dataset()
    print(time.perf_counter() - t, -1)
else:
    import polars as pl
    t = time.perf_counter()
    n = pl.scan_delta(uri, storage_options=opts).select(pl.len()).collect().item()
    print(time.perf_counter() - t, n)
"#;

/// One Python open: seconds, rows (polars), requests.
fn py_open(python: &Path, s3: &S3Server, mode: &str, uri: &str) -> Result<Opened> {
    s3.take_requests();
    let m = exec::run(
        Command::new(python)
            .envs(s3.env())
            .args(["-c", PY_OPEN, mode, uri]),
    )?;
    let requests = s3.take_requests().total();
    let line = m.stdout.lines().rfind(|l| !l.trim().is_empty());
    let parsed = line.and_then(|l| {
        let (s, n) = l.trim().split_once(' ')?;
        Some((s.parse::<f64>().ok()?, n.parse::<i64>().ok()?))
    });
    let (seconds, rows) = parsed.with_context(|| format!("{mode}: {:?}", m.stdout))?;
    Ok(Opened {
        seconds,
        rows: u64::try_from(rows).ok(),
        requests,
    })
}

/// Where the table is and how to read it.
pub struct Readers<'a> {
    pub bin: &'a Path,
    pub python: Option<&'a Path>,
    pub store: &'a str,
    pub table: &'a str,
}

/// The three opens of the table.
pub fn opens(r: &Readers, s3: &S3Server) -> Result<Opens> {
    let q = query(r.bin, s3, r.store, r.table)?;
    let mut o = Opens {
        query_s: q.seconds,
        query_rows: q.rows.unwrap_or(0),
        query_requests: q.requests,
        ..Opens::default()
    };
    let Some(python) = r.python else {
        return Ok(o);
    };
    let uri = format!("{}/{}", r.store, r.table);
    let python_open = |mode: &str| py_open(python, s3, mode, &uri);
    match python_open("deltars").and_then(|d| Ok((d, python_open("polars")?))) {
        Ok((d, p)) => {
            o.deltars_s = Some(d.seconds);
            o.deltars_requests = Some(d.requests);
            o.polars_s = Some(p.seconds);
            o.polars_rows = p.rows;
            o.polars_requests = Some(p.requests);
        }
        Err(e) => o.python_error = Some(format!("{e:#}")),
    }
    Ok(o)
}

/// The listings of the landing prefix among `counts`.
pub fn landing(counts: &RequestCounts) -> Listed {
    counts.listed.get(LANDING).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_names() {
        let single = "00000000000000001000.checkpoint.parquet";
        assert_eq!(checkpoint_version(single), Some(1000));
        let part = "00000000000000000010.checkpoint.0000000001.0000000002.parquet";
        assert_eq!(checkpoint_version(part), Some(10));
        assert_eq!(checkpoint_version("00000000000000001000.json"), None);
        assert_eq!(checkpoint_version("_last_checkpoint"), None);
    }
}
