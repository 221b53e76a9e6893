//! What `serve` shows: the chart `serve.svg` (the depth and each file's latency against time)
//! and the summary it prints.

use std::fmt::Write;

use anyhow::Result;

use super::record::{Sample, ServeResult};
use crate::chart::{Line, LinePanel, grid_svg};

const X: &str = "seconds since the first arrival";
const MB: f64 = 1e6;

fn per_sample(doc: &ServeResult, name: &str, f: fn(&Sample) -> Option<f64>) -> Line {
    Line {
        name: name.into(),
        points: (doc.samples.iter())
            .filter_map(|s| Some((s.t_s.max(0.0), f(s)?)))
            .collect(),
    }
}

fn panels(doc: &ServeResult) -> Vec<LinePanel> {
    let latency = (doc.files.iter())
        .filter_map(|f| Some((f.landed_s.max(0.0), f.latency_s?)))
        .collect();
    vec![
        LinePanel {
            caption: "overlap depth".into(),
            x_desc: X,
            y_desc: "depth",
            lines: vec![
                per_sample(doc, "depth", |s| Some(s.depth as f64)),
                per_sample(doc, "bound", |s| s.depth_bound.map(|b| b as f64)),
            ],
        },
        LinePanel {
            caption: "landing to visible, per file (at its landing)".into(),
            x_desc: X,
            y_desc: "seconds",
            lines: vec![Line {
                name: "latency".into(),
                points: latency,
            }],
        },
    ]
}

/// The chart as SVG text: two panels side by side.
pub fn svg(doc: &ServeResult) -> Result<String> {
    let p = &doc.params;
    let title = format!(
        "{} · serve: {} rows + {} files of {} rows every {} s, {} kills",
        doc.build.version,
        crate::chart::count_label(p.initial_rows as f64),
        p.files,
        crate::chart::count_label(p.file_rows as f64),
        p.interval_s,
        p.kills
    );
    grid_svg(&panels(doc), 2, &title)
}

fn secs(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1} s"))
}

/// The summary: one line per figure.
pub fn summary(doc: &ServeResult) -> String {
    let mut out = String::new();
    let p = &doc.params;
    let _ = writeln!(
        out,
        "serve: {} base rows, {} files × {} rows every {} s, {} kills, poll {}, batch age {}",
        p.initial_rows, p.files, p.file_rows, p.interval_s, p.kills, p.poll_interval, p.batch_age
    );
    if let Some(f) = &doc.figures {
        let budget = p.tier["load_budget"].as_f64().unwrap_or(0.0) / MB;
        let _ = writeln!(
            out,
            "latency landing→visible: p50 {}, p99 {}, max {} ({} of {} files seen; the service's mean {})",
            secs(f.latency_p50_s),
            secs(f.latency_p99_s),
            secs(f.latency_max_s),
            doc.files.iter().filter(|f| f.latency_s.is_some()).count(),
            doc.files.len(),
            secs(f.service_latency_mean_s)
        );
        let _ = writeln!(
            out,
            "write amplification {:.2}: merges wrote {:.1} MB over {:.1} MB arrived; {} files loaded",
            f.write_amplification,
            f.merge_written_bytes as f64 / MB,
            f.arrived_bytes as f64 / MB,
            f.files_loaded
        );
        let _ = writeln!(
            out,
            "depth: max {}; {} polls right after a merge, {} over the bound; {} polls over it in all; settled {:.1} s after the last arrival",
            f.max_depth,
            f.polls_after_merge,
            f.polls_after_merge_over_bound,
            f.polls_over_bound,
            f.settle_s
        );
        let _ = writeln!(
            out,
            "service processes: {}, peak RSS {:.0} MB (budget {budget:.0} MB), CPU {:.1} s",
            doc.processes.len(),
            f.peak_rss_mb,
            f.cpu_s
        );
    }
    if let Some(e) = &doc.exactness {
        let _ = writeln!(
            out,
            "exactness: {} rows, {} distinct WatchIDs, expected {}: lost {}, duplicated {}",
            e.rows, e.distinct_watch_ids, e.expected_rows, e.lost, e.duplicated
        );
    }
    if let Some(i) = &doc.idle {
        let _ = writeln!(
            out,
            "idle: {:.2} CPU s over {:.0} s: {:.2} % of a core",
            i.cpu_s,
            i.seconds,
            i.core_share * 100.0
        );
        if let Some(l) = &i.listings {
            let per_poll = l.per_poll.map_or("-".into(), |p| format!("{p:.2}"));
            let _ = writeln!(
                out,
                "idle: {} landing listings in {:.0} s: {per_poll} a poll",
                l.listings, l.window_s
            );
        }
    }
    if let Some(e) = &doc.error {
        let _ = writeln!(out, "stopped: {}", e.lines().next().unwrap_or(""));
    }
    out
}
