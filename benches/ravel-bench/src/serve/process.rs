//! One `ravel-load serve` process as the benchmark drives it: started on an ephemeral port,
//! asked over HTTP, measured from /proc, stopped by SIGTERM or SIGKILL.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// How long a start may take before the service says where it listens, and how long a
/// request or a stop may take.
const START_TIMEOUT: Duration = Duration::from_secs(120);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running service and the address of its endpoints.
pub struct Service {
    child: Child,
    pub addr: String,
}

/// What /proc says of a process: its peak resident memory and the CPU it used so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// VmHWM, bytes.
    pub peak_rss_bytes: u64,
    /// VmRSS, bytes.
    pub rss_bytes: u64,
    /// utime + stime, seconds.
    pub cpu_s: f64,
}

/// The figures of `/metrics` the benchmark reads (counters of this process only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub merge_written_bytes: u64,
    pub files_loaded: u64,
    /// The service's own landing-to-visible histogram: observations and their sum.
    pub latency_count: u64,
    pub latency_sum_s: f64,
}

impl Service {
    /// Starts `bin serve -v --config config --listen 127.0.0.1:0`, its stderr (its info log:
    /// every load and merge) appended to `log`; returns once it says where it listens.
    pub fn start(bin: &Path, config: &Path, log: &Path) -> Result<Service> {
        Service::start_env(bin, config, log, &[])
    }

    /// [`Service::start`] with `env` added to the process's environment (the settings of an
    /// S3 store).
    pub fn start_env(
        bin: &Path,
        config: &Path,
        log: &Path,
        env: &[(&str, String)],
    ) -> Result<Service> {
        let mut child = Command::new(bin)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["serve", "-v", "--config"])
            .arg(config)
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} serve", bin.display()))?;
        let mut out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("ravel-load serve: listening on http://") {
                    let _ = tx.send(addr.to_string());
                }
                let _ = writeln!(out, "{line}");
            }
        });
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => Ok(Service { child, addr }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "the service never said where it listens (see {})",
                    log.display()
                )
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// GET `path`: the body of a 200 response.
    pub fn get(&self, path: &str) -> Result<String> {
        let mut s = TcpStream::connect(&self.addr)?;
        s.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        s.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )?;
        let mut response = String::new();
        s.read_to_string(&mut response)?;
        let (head, body) = response
            .split_once("\r\n\r\n")
            .context("an HTTP response without a body")?;
        if head.split(' ').nth(1) != Some("200") {
            bail!("GET {path}: {head}: {body}");
        }
        Ok(body.to_string())
    }

    /// The table's status (`/v1/tables/{table}`).
    pub fn status(&self, table: &str) -> Result<Value> {
        let body = self.get(&format!("/v1/tables/{table}"))?;
        serde_json::from_str(&body).context("the table's status as JSON")
    }

    pub fn counters(&self) -> Result<Counters> {
        let text = self.get("/metrics")?;
        let v = |name: &str| metric(&text, name).unwrap_or(0.0);
        Ok(Counters {
            merge_written_bytes: v("ravel_merge_written_bytes_total") as u64,
            files_loaded: v("ravel_files_loaded_total") as u64,
            latency_count: v("ravel_landing_to_visible_seconds_count") as u64,
            latency_sum_s: v("ravel_landing_to_visible_seconds_sum"),
        })
    }

    pub fn usage(&self) -> Result<Usage> {
        usage(self.pid())
    }

    /// SIGKILL, and waits for the process.
    pub fn kill(mut self) -> Result<()> {
        self.child.kill().context("killing the service")?;
        self.child.wait()?;
        Ok(())
    }

    /// SIGTERM; an error unless it exits 0 within [`STOP_TIMEOUT`].
    pub fn terminate(mut self) -> Result<()> {
        // SAFETY: kill(2) on our own child's pid, not yet waited for.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < STOP_TIMEOUT {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("the service stopped by SIGTERM exited with {status}");
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill()?;
        bail!("the service did not stop within {STOP_TIMEOUT:?} of SIGTERM")
    }
}

/// The value of the first sample of `name` (any labels) in the Prometheus text `text`.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(['{', ' ']))
        })
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
}

/// The peak RSS (VmHWM of /proc/pid/status) and CPU seconds (utime + stime of /proc/pid/stat)
/// of process `pid`.
pub fn usage(pid: u32) -> Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = |field: &str| -> Option<u64> {
        let v = status.lines().find_map(|l| l.strip_prefix(field))?;
        v.split_whitespace().next()?.parse().ok()
    };
    let hwm_kb = kb("VmHWM:").context("no VmHWM in /proc/pid/status")?;
    let rss_kb = kb("VmRSS:").context("no VmRSS in /proc/pid/status")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name (which may hold spaces, in parentheses): state is
    // field 3, utime 14 and stime 15.
    let rest = stat.rsplit_once(')').context("/proc/pid/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let (Some(utime), Some(stime)) = (ticks(11), ticks(12)) else {
        bail!("no utime and stime in /proc/{pid}/stat");
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok(Usage {
        peak_rss_bytes: hwm_kb * 1024,
        rss_bytes: rss_kb * 1024,
        cpu_s: (utime + stime) as f64 / hz,
    })
}

/// How many times process `pid` (its threads included) opens the directory `dir` over
/// `window`, traced with `strace -e trace=openat`; `None` where strace cannot attach.
pub fn directory_opens(pid: u32, dir: &Path, window: Duration, trace: &Path) -> Option<u64> {
    let mut strace = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=openat", "-o"])
        .arg(trace)
        .args(["-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    std::thread::sleep(window);
    // SAFETY: kill(2) on our own child's pid, not yet waited for; strace detaches on SIGINT.
    unsafe { libc::kill(strace.id() as libc::pid_t, libc::SIGINT) };
    strace.wait().ok()?;
    let text = std::fs::read_to_string(trace).ok()?;
    let quoted = format!("\"{}\"", dir.display());
    let opens = text
        .lines()
        .filter(|l| l.contains("openat(") && l.contains(&quoted) && l.contains("O_DIRECTORY"))
        .count();
    Some(opens as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_text_and_own_usage() {
        let text = "# TYPE ravel_files_loaded counter\n\
                    ravel_files_loaded_total{table=\"hits\"} 12\n\
                    ravel_landing_to_visible_seconds_sum{table=\"hits\"} 30.5\n\
                    ravel_merge_written_bytes_total{table=\"hits\"} 1234\n";
        assert_eq!(metric(text, "ravel_files_loaded_total"), Some(12.0));
        assert_eq!(metric(text, "ravel_files_loaded"), None);
        assert_eq!(
            metric(text, "ravel_landing_to_visible_seconds_sum"),
            Some(30.5)
        );
        let u = usage(std::process::id()).unwrap();
        assert!(u.peak_rss_bytes > 0 && u.cpu_s >= 0.0);
    }
}
