//! Running a child process and measuring it: wall seconds and peak RSS (the kernel's
//! `ru_maxrss` of that child, read with `wait4`), output captured.
//!
//! Linux counts in a child's `ru_maxrss` the peak resident memory of its parent before the
//! exec, so the harness keeps its own memory small (the DataFusion presort runs as a child of its own);
//! [`floor`] measures what an empty child reports, which the result records.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// What one child process did.
pub struct Measured {
    pub wall_s: f64,
    pub peak_rss_bytes: u64,
    /// CPU seconds in user and kernel mode.
    pub user_s: f64,
    pub sys_s: f64,
    /// The share of the machine's CPU time that its hypervisor took for other guests (steal)
    /// while the command ran, from /proc/stat; `None` where that is not readable. A noisy
    /// neighbour shows here, not in the command's own CPU times.
    pub steal_share: Option<f64>,
    pub stdout: String,
}

/// The machine's CPU ticks from /proc/stat's `cpu` line: (steal, total).
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice], guest time being
    // counted in user already.
    Some((*ticks.get(7)?, ticks.iter().take(8).sum()))
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion; an exit other than 0 is an error carrying the command and the end
/// of its stderr.
pub fn run(cmd: &mut Command) -> Result<Measured> {
    let what = describe(cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let ticks = cpu_ticks();
    let t = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`Child` is never waited on below), and
    // both out-pointers point at live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_s = t.elapsed().as_secs_f64();
    let steal_share = match (ticks, cpu_ticks()) {
        (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => Some((s1 - s0) as f64 / (t1 - t0) as f64),
        _ => None,
    };
    if r != pid {
        bail!("waiting for {what}: {}", std::io::Error::last_os_error());
    }
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let exited = libc::WIFEXITED(status);
    let code = libc::WEXITSTATUS(status);
    if !exited || code != 0 {
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let how = if exited {
            format!("exit code {code}")
        } else {
            format!("signal {}", libc::WTERMSIG(status))
        };
        bail!("{what} failed ({how}):\n{}", tail.join("\n"));
    }
    Ok(Measured {
        wall_s,
        // Linux reports ru_maxrss in KiB.
        peak_rss_bytes: usage.ru_maxrss as u64 * 1024,
        user_s: usage.ru_utime.tv_sec as f64 + usage.ru_utime.tv_usec as f64 / 1e6,
        sys_s: usage.ru_stime.tv_sec as f64 + usage.ru_stime.tv_usec as f64 / 1e6,
        steal_share,
        stdout,
    })
}

/// The peak RSS of a child that does nothing (`true`): the part of every figure that is the
/// harness's own.
pub fn floor() -> Result<u64> {
    Ok(run(&mut Command::new("true"))?.peak_rss_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_child_and_reports_its_failure() {
        // A child that allocates and touches ~64 MiB has at least that peak RSS.
        let m = run(Command::new("python3").args([
            "-c",
            "b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('done')",
        ]))
        .unwrap();
        assert_eq!(m.stdout.trim(), "done");
        assert!(m.peak_rss_bytes >= 64 << 20, "{}", m.peak_rss_bytes);
        assert!(m.wall_s > 0.0);
        let steal = m.steal_share.expect("/proc/stat is readable on Linux");
        assert!((0.0..=1.0).contains(&steal), "{steal}");

        let e = run(Command::new("sh").args(["-c", "echo broken >&2; exit 3"]))
            .err()
            .expect("exit 3 fails");
        let text = format!("{e:#}");
        assert!(
            text.contains("exit code 3") && text.contains("broken"),
            "{text}"
        );
    }
}
