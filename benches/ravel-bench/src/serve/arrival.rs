//! The arrival: staged files renamed into the landing directory at a fixed rate while the
//! service runs (killed and restarted at fixed moments), its status polled throughout; then
//! the wait until it has loaded everything and kept its depth bound, and its stop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::process::Service;
use super::record::{FileRecord, ProcessRecord, Sample};
use crate::steps::TABLE;

/// Time between two looks at the status.
pub const SAMPLE: Duration = Duration::from_millis(500);

/// A generated file waiting in the staging directory.
#[derive(Debug, Clone)]
pub struct Staged {
    pub path: PathBuf,
    pub name: String,
}

/// What the arrival does.
pub struct Plan<'a> {
    pub bin: &'a Path,
    pub config: &'a Path,
    pub log: &'a Path,
    pub landing: &'a Path,
    pub staged: Vec<Staged>,
    pub interval: Duration,
    pub kills: u32,
    pub expected_rows: u64,
    /// How long after the last arrival the service may take to settle.
    pub settle_timeout: Duration,
}

/// What the arrival recorded.
#[derive(Default)]
pub struct Outcome {
    pub files: Vec<FileRecord>,
    pub samples: Vec<Sample>,
    pub processes: Vec<ProcessRecord>,
    /// From the last arrival until the service settled.
    pub settle_s: f64,
}

/// The service process running now, and when it started.
struct Running {
    service: Service,
    started_s: f64,
    start_s: f64,
}

/// How a service process ends.
#[derive(Clone, Copy)]
enum End {
    Kill,
    Term,
}

/// The main thread's state: the clock, the running service, what was recorded.
struct Driver<'a> {
    plan: &'a Plan<'a>,
    t0: Instant,
    t0_wall: SystemTime,
    running: Option<Running>,
    out: Outcome,
}

impl Driver<'_> {
    fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn start(&mut self) -> Result<()> {
        let started_s = self.now_s();
        let service = Service::start(self.plan.bin, self.plan.config, self.plan.log)?;
        self.running = Some(Running {
            service,
            started_s,
            start_s: self.now_s() - started_s,
        });
        Ok(())
    }

    /// Records the status, if the service answers; returns it.
    fn sample(&mut self) -> Option<Sample> {
        let running = self.running.as_ref()?;
        let status = running.service.status(TABLE).ok()?;
        let s = sample_of(&status, self.now_s(), self.out.processes.len());
        self.out.samples.push(s.clone());
        Some(s)
    }

    /// Reads the running process's counters and usage, then ends it.
    fn end(&mut self, end: End) -> Result<()> {
        let r = self.running.take().context("no service is running")?;
        let counters = r.service.counters().unwrap_or_default();
        let usage = r.service.usage()?;
        match end {
            End::Kill => r.service.kill()?,
            End::Term => r.service.terminate()?,
        }
        self.out.processes.push(ProcessRecord {
            started_s: r.started_s,
            stopped_s: self.now_s(),
            end: match end {
                End::Kill => "kill",
                End::Term => "term",
            }
            .into(),
            start_s: r.start_s,
            peak_rss_mb: usage.peak_rss_bytes as f64 / 1e6,
            cpu_s: usage.cpu_s,
            merge_written_bytes: counters.merge_written_bytes,
            files_loaded: counters.files_loaded,
            latency_count: counters.latency_count,
            latency_sum_s: counters.latency_sum_s,
        });
        Ok(())
    }
}

fn sample_of(status: &Value, t_s: f64, process: usize) -> Sample {
    let n = |k: &str| status[k].as_u64().unwrap_or(0);
    Sample {
        t_s,
        process,
        rows: n("rows"),
        objects: n("objects"),
        depth: n("depth"),
        depth_bound: status["depth_bound"].as_u64(),
        pending_files: n("pending_files"),
        loads: n("loads"),
        merges: n("merges"),
        failures: n("failures"),
        next_action: status["next"]["action"].as_str().unwrap_or("").into(),
    }
}

/// Runs the arrival of `plan`; `out` holds what was recorded even when it fails.
pub fn run(plan: &Plan, out: &mut Outcome) -> Result<()> {
    let mut d = Driver {
        plan,
        t0: Instant::now(),
        t0_wall: SystemTime::now(),
        running: None,
        out: Outcome::default(),
    };
    let result = drive(&mut d);
    if let Some(r) = d.running.take() {
        let _ = r.service.kill();
    }
    *out = d.out;
    result
}

fn drive(d: &mut Driver) -> Result<()> {
    d.start()?;
    wait_polled(d)?;
    d.t0 = Instant::now();
    d.t0_wall = SystemTime::now();
    if let Some(r) = &mut d.running {
        r.started_s = 0.0;
    }
    let arrivals = spawn_arrivals(d.plan, d.t0);
    let last_s = d.plan.interval.as_secs_f64() * (d.plan.staged.len().max(1) - 1) as f64;
    let kills = kill_moments(last_s, d.plan.kills);
    let mut next_kill = kills.iter().peekable();
    let mut tick = 0u32;
    while d.now_s() <= last_s {
        if next_kill.next_if(|&&k| d.now_s() >= k).is_some() {
            d.end(End::Kill)?;
            d.start()?;
        }
        d.sample();
        tick += 1;
        std::thread::sleep((d.t0 + SAMPLE * tick).saturating_duration_since(Instant::now()));
    }
    let landed = arrivals
        .join()
        .map_err(|_| anyhow::anyhow!("the arrival thread panicked"))??;
    d.out.files = file_records(&landed, d.t0_wall);
    let settled_from = d.now_s();
    settle(d)?;
    d.out.settle_s = d.now_s() - settled_from;
    d.end(End::Term)
}

/// Waits until the service has polled the table (its status names a version).
fn wait_polled(d: &mut Driver) -> Result<()> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        let status = d.running.as_ref().map(|r| r.service.status(TABLE));
        if let Some(Ok(s)) = status
            && !s["version"].is_null()
        {
            return Ok(());
        }
        std::thread::sleep(SAMPLE);
    }
    bail!("the service never read the table's log")
}

/// `kills` moments evenly spread over (0, `last_s`): the j-th at `last_s × j / (kills + 1)`.
pub fn kill_moments(last_s: f64, kills: u32) -> Vec<f64> {
    (1..=kills)
        .map(|j| last_s * f64::from(j) / f64::from(kills + 1))
        .collect()
}

/// Polls until no file is pending, every row is visible, the depth is within its bound and
/// no merge is planned: a merge still running when the service stops would write bytes its
/// counters, read before the stop, do not hold.
fn settle(d: &mut Driver) -> Result<()> {
    let start = Instant::now();
    let expected = d.plan.expected_rows;
    loop {
        let done = d.sample().is_some_and(|s| {
            s.pending_files == 0
                && s.rows >= expected
                && s.depth_bound.is_none_or(|b| s.depth <= b)
                && s.next_action == "nothing"
        });
        if done {
            return Ok(());
        }
        if start.elapsed() > d.plan.settle_timeout {
            bail!(
                "the service did not settle within {:?} of the last arrival (the last status: {:?})",
                d.plan.settle_timeout,
                d.out.samples.last()
            );
        }
        std::thread::sleep(SAMPLE);
    }
}

/// A file as it landed: its bytes and its modification time after the rename.
struct Landed {
    bytes: u64,
    landed: SystemTime,
}

/// Renames each staged file into the landing directory at its moment (file k at t0 + k ×
/// interval), its modification time set to that moment first: a rename keeps it, and the
/// service measures from it.
fn spawn_arrivals(plan: &Plan, t0: Instant) -> JoinHandle<Result<Vec<Landed>>> {
    let staged = plan.staged.clone();
    let landing = plan.landing.to_path_buf();
    let interval = plan.interval;
    std::thread::spawn(move || {
        let mut landed = Vec::with_capacity(staged.len());
        for (k, f) in staged.iter().enumerate() {
            let at = t0 + interval * k as u32;
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            landed.push(land(f, &landing).with_context(|| format!("landing {}", f.name))?);
        }
        Ok(landed)
    })
}

fn land(f: &Staged, landing: &Path) -> Result<Landed> {
    File::options()
        .write(true)
        .open(&f.path)?
        .set_modified(SystemTime::now())?;
    let to = landing.join(&f.name);
    std::fs::rename(&f.path, &to)?;
    let meta = std::fs::metadata(&to)?;
    Ok(Landed {
        bytes: meta.len(),
        landed: meta.modified()?,
    })
}

fn file_records(landed: &[Landed], t0: SystemTime) -> Vec<FileRecord> {
    let since = |t: SystemTime| match t.duration_since(t0) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    (landed.iter().enumerate())
        .map(|(k, l)| FileRecord {
            index: k as u32,
            bytes: l.bytes,
            landed_s: since(l.landed),
            visible_s: None,
            latency_s: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_spread_over_the_arrival() {
        assert_eq!(kill_moments(600.0, 5), [100.0, 200.0, 300.0, 400.0, 500.0]);
        assert!(kill_moments(600.0, 0).is_empty());
    }
}
